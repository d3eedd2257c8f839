-- Large values (answers and their rendered HTML and search data, uploaded
-- documents, run checkpoints) are compressed with lz4 instead of pglz
-- when PostgreSQL was built with it (Debian's is): pglz_compress was the
-- first symbol of PostgreSQL's CPU profile with 1,000 answers streaming
-- (every final answer is TOASTed once), and lz4 compresses several times
-- faster for about the same size. Only new values change; a server
-- without lz4 keeps pglz.
DO $$
DECLARE
    c record;
BEGIN
    FOR c IN
        SELECT cl.relname, a.attname
        FROM pg_attribute a
        JOIN pg_class cl ON cl.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = cl.relnamespace
        WHERE n.nspname = current_schema() AND cl.relkind = 'r' AND cl.relname NOT LIKE 'river%'
          AND a.attnum > 0 AND NOT a.attisdropped AND a.attstorage IN ('x', 'm')
        ORDER BY cl.relname, a.attnum
    LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET COMPRESSION lz4', c.relname, c.attname);
    END LOOP;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available on this server: large values stay pglz';
END $$;
