-- How many chunks of a knowledge base hold each word (lexeme of the
-- 'simple' configuration). Full-text retrieval leaves out words that most
-- chunks hold: ranking every chunk that matches "the" would cost time in
-- proportion to the knowledge base, for no gain in rank.
CREATE TABLE kb_lexemes (
    kb_id  bigint NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    word   text NOT NULL,
    chunks integer NOT NULL,
    PRIMARY KEY (kb_id, word)
);
ALTER TABLE knowledge_bases ADD COLUMN chunks integer NOT NULL DEFAULT 0;

-- The chunking a document was started with: an ingestion that resumes
-- after a settings change goes on with the same cuts.
ALTER TABLE kb_documents ADD COLUMN chunk_size integer NOT NULL DEFAULT 0;
ALTER TABLE kb_documents ADD COLUMN chunk_overlap integer NOT NULL DEFAULT 0;
