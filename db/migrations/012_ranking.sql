-- Ranking that holds on documents nobody tuned for (issue 14).
--
-- Each knowledge base has a language: its chunks' full-text vectors are
-- stemmed with that text-search configuration (english by default), so
-- "files" finds "file". Identifiers such as max_connections, which the
-- parser splits, are also kept whole (idents, lexemes added as they are).
-- The document's title is part of every chunk's full-text vector and of its
-- embedding input (contextual chunks): a passage deep in a page still says
-- which page it is from.
ALTER TABLE knowledge_bases ADD COLUMN language text NOT NULL DEFAULT 'english'
    CHECK (language IN ('simple', 'arabic', 'armenian', 'basque', 'catalan', 'danish', 'dutch', 'english',
        'finnish', 'french', 'german', 'greek', 'hindi', 'hungarian', 'indonesian', 'irish', 'italian',
        'lithuanian', 'nepali', 'norwegian', 'portuguese', 'romanian', 'russian', 'serbian', 'spanish',
        'swedish', 'tamil', 'turkish', 'yiddish'));

-- A language chosen in the settings waits here while the chunks are
-- indexed again with it (rag's kb_language job); searches keep the old one
-- meanwhile, matching the chunks.
ALTER TABLE knowledge_bases ADD COLUMN pending_language text NOT NULL DEFAULT '';

-- The language as text, not regconfig: pg_upgrade refuses user tables
-- with reg* columns other than regclass, regrole and regtype.
ALTER TABLE kb_chunks ADD COLUMN lang text NOT NULL DEFAULT 'english';
ALTER TABLE kb_chunks ADD COLUMN title text NOT NULL DEFAULT '';
ALTER TABLE kb_chunks ADD COLUMN idents text[] NOT NULL DEFAULT '{}';

-- The text the parser reads: dotted names split into their parts
-- (os.path.join → os path join), which the parser would otherwise keep only
-- whole; the whole names are in idents. Questions go through it too.
CREATE FUNCTION kb_search_text(t text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN regexp_replace(t, '(?<=[[:alnum:]_])\.(?=[[:alpha:]_])', ' ', 'g');

-- A chunk's full-text vector. Declared immutable although the cast of a
-- name to a configuration reads the catalog: the built-in configurations
-- it names never change (the usual wrapper, as for unaccent).
CREATE FUNCTION kb_tsvector(lang text, body text, idents text[]) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN to_tsvector(lang::regconfig, kb_search_text(body)) || array_to_tsvector(idents);

-- Chunks stored so far: their title is their document's name without the
-- extension of its format (what ingestion now does, rag.DocTitle); their
-- embeddings stay as they were until the knowledge base is re-embedded.
-- The title is set by the same rewrite of the table that computes the new
-- vectors (an ALTER TYPE to the same type, USING the document's name): an
-- UPDATE first would write every chunk once more, with new entries in all
-- of its indexes, HNSW ones included. USING takes no subquery; a function
-- does it, dropped afterwards.
CREATE FUNCTION kb_migrate_title(doc bigint) RETURNS text LANGUAGE sql STABLE
    RETURN COALESCE((SELECT regexp_replace(name, '\.(html?|xhtml|md|markdown|txt|text|pdf|docx|csv|tsv|rst)$', '', 'i')
        FROM kb_documents WHERE id = doc), '');
ALTER TABLE kb_chunks
    ALTER COLUMN title TYPE text USING kb_migrate_title(document_id),
    DROP COLUMN tsv,
    ADD COLUMN tsv tsvector GENERATED ALWAYS AS
        (kb_tsvector(lang, title || ' ' || heading || ' ' || text, idents)) STORED;
DROP FUNCTION kb_migrate_title(bigint);
CREATE INDEX kb_chunks_tsv_idx ON kb_chunks USING gin (tsv);

-- The word counts are of the new lexemes: counted again.
DELETE FROM kb_lexemes;
INSERT INTO kb_lexemes (kb_id, word, chunks)
    SELECT c.kb_id, l.lexeme, count(*)
    FROM kb_chunks c JOIN kb_documents d ON d.id = c.document_id AND d.status = 'ready'
        JOIN knowledge_bases k ON k.id = c.kb_id AND k.generation = c.generation,
        unnest(tsvector_to_array(c.tsv)) l(lexeme)
    GROUP BY c.kb_id, l.lexeme;

-- Sources are chosen by the room the model's window leaves them
-- (chat.SourceChars); top_k is now the most an answer gets, no longer how
-- many it always gets. Knowledge bases at the old default get the new one.
ALTER TABLE knowledge_bases ALTER COLUMN top_k SET DEFAULT 16;
UPDATE knowledge_bases SET top_k = 16 WHERE top_k = 6;
