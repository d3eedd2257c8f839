-- The vector index over halfvec (issue 14): each embedding dimension's
-- partial HNSW index, kb_chunks_hnsw_N over embedding::vector(N), becomes
-- kb_chunks_halfvec_N over embedding::halfvec(N) with m = 16,
-- ef_construction = 40 (db.VectorIndexDDL: keep the two equal). Half the
-- bytes per vector, and a shorter candidate list when a chunk is inserted:
-- inserting with the index maintained is about 1.3 times faster, for the
-- same recall (docs/PERFORMANCE.md, "Ingestion and the vector index"). The
-- stored vectors stay full precision.
--
-- Every dimension that had an index, or that a knowledge base uses or is
-- moving to, gets the new one; the build reads every chunk of that
-- dimension once (about 12 minutes for a million on two cores).
SET LOCAL maintenance_work_mem = '512MB';
DO $$
DECLARE
    n integer;
BEGIN
    FOR n IN
        SELECT substring(indexname FROM '^kb_chunks_hnsw_([0-9]+)$')::integer
            FROM pg_indexes
            WHERE schemaname = current_schema() AND tablename = 'kb_chunks' AND indexname ~ '^kb_chunks_hnsw_[0-9]+$'
        UNION SELECT dims FROM knowledge_bases
        UNION SELECT pending_dims FROM knowledge_bases WHERE pending_dims > 0
    LOOP
        EXECUTE format('DROP INDEX IF EXISTS %I', 'kb_chunks_hnsw_' || n);
        IF n BETWEEN 1 AND 2000 THEN
            EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON kb_chunks USING hnsw ((embedding::halfvec(%s)) halfvec_cosine_ops)'
                || ' WITH (m = 16, ef_construction = 40) WHERE dims = %s', 'kb_chunks_halfvec_' || n, n, n);
        END IF;
    END LOOP;
END
$$;
