-- Knowledge bases: documents uploaded into a workspace, cut into chunks with
-- an embedding (pgvector) and a full-text vector each.
CREATE TABLE knowledge_bases (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace_id   bigint NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    owner_id       bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name           text NOT NULL CHECK (name <> ''),
    embed_model    text NOT NULL CHECK (embed_model <> ''),
    dims           integer NOT NULL CHECK (dims > 0 AND dims <= 16000),
    chunk_size     integer NOT NULL DEFAULT 1500 CHECK (chunk_size BETWEEN 200 AND 20000),
    chunk_overlap  integer NOT NULL DEFAULT 200 CHECK (chunk_overlap >= 0),
    top_k          integer NOT NULL DEFAULT 6 CHECK (top_k BETWEEN 1 AND 50),
    min_similarity double precision NOT NULL DEFAULT 0.2 CHECK (min_similarity BETWEEN -1 AND 1),
    -- Chunks of this generation are the ones retrieved. Changing the
    -- embedding model builds the next generation beside it (pending_*), then
    -- swaps in one transaction.
    generation     integer NOT NULL DEFAULT 1,
    pending_model  text NOT NULL DEFAULT '',
    pending_dims   integer NOT NULL DEFAULT 0,
    pending_error  text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX knowledge_bases_name_key ON knowledge_bases (workspace_id, lower(name));
CREATE INDEX knowledge_bases_owner_idx ON knowledge_bases (owner_id);

CREATE TABLE kb_documents (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kb_id      bigint NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    owner_id   bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name       text NOT NULL,
    sha256     text NOT NULL,
    size       bigint NOT NULL,
    format     text NOT NULL DEFAULT '',
    status     text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'processing', 'ready', 'failed')),
    error      text NOT NULL DEFAULT '',
    progress   real NOT NULL DEFAULT 0,
    chunks     integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- The same content twice in one knowledge base is a duplicate.
CREATE UNIQUE INDEX kb_documents_content_key ON kb_documents (kb_id, sha256);

-- The uploaded bytes, kept in the database so that any instance can ingest
-- (and re-chunk) them.
CREATE TABLE kb_document_files (
    document_id bigint PRIMARY KEY REFERENCES kb_documents (id) ON DELETE CASCADE,
    data        bytea NOT NULL
);

CREATE TABLE kb_chunks (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kb_id       bigint NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    document_id bigint NOT NULL REFERENCES kb_documents (id) ON DELETE CASCADE,
    -- Repeated so that the access filter sits inside every retrieval query.
    owner_id    bigint NOT NULL,
    generation  integer NOT NULL,
    position    integer NOT NULL,
    text        text NOT NULL,
    headings    text[] NOT NULL DEFAULT '{}',
    -- The heading path as one line, searched with the text.
    heading     text NOT NULL DEFAULT '',
    page        integer NOT NULL DEFAULT 0,
    dims        integer NOT NULL,
    -- No fixed dimension: each dimension in use gets its own partial HNSW
    -- index on embedding::vector(N) (db.EnsureVectorIndex).
    embedding   vector NOT NULL,
    tsv         tsvector GENERATED ALWAYS AS
                (to_tsvector('simple', heading || ' ' || text)) STORED,
    UNIQUE (document_id, generation, position)
);
CREATE INDEX kb_chunks_tsv_idx ON kb_chunks USING gin (tsv);
CREATE INDEX kb_chunks_kb_idx ON kb_chunks (kb_id, generation);

-- Knowledge bases attached to a thread. Deleting either side detaches.
CREATE TABLE thread_kbs (
    thread_id bigint NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    kb_id     bigint NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    PRIMARY KEY (thread_id, kb_id)
);
CREATE INDEX thread_kbs_kb_idx ON thread_kbs (kb_id);
