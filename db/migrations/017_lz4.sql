-- Large values (answers and their rendered HTML and search data, uploaded
-- documents, run checkpoints) are compressed with lz4 instead of pglz
-- when PostgreSQL was built with it (Debian's is): pglz_compress was the
-- first symbol of PostgreSQL's CPU profile with 1,000 answers streaming
-- (every final answer is TOASTed once), and lz4 compresses several times
-- faster for about the same size. Only new values change (no rewrite).
--
-- Only tables Weft's role owns, outside any extension, are changed: with
-- DATABASE_URL the schema may hold another application's tables. Each
-- change takes a short ACCESS EXCLUSIVE lock; a table busy for more than
-- 5 s (an instance still running during an upgrade) is left on pglz
-- rather than stalling the start. A server without lz4 keeps pglz.
-- Columns added by later migrations get lz4 from the migrator (db.lz4NewColumns).
DO $$
DECLARE
    c record;
BEGIN
    BEGIN
        PERFORM set_config('default_toast_compression', 'lz4', true);
    EXCEPTION WHEN invalid_parameter_value THEN
        RAISE NOTICE 'lz4 is not available on this server: large values stay pglz';
        RETURN;
    END;
    PERFORM set_config('lock_timeout', '5s', true);
    FOR c IN
        SELECT cl.relname, a.attname
        FROM pg_attribute a
        JOIN pg_class cl ON cl.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = cl.relnamespace
        WHERE n.nspname = current_schema() AND cl.relkind = 'r' AND cl.relname NOT LIKE 'river%'
          AND pg_has_role(cl.relowner, 'USAGE')
          AND NOT EXISTS (SELECT 1 FROM pg_depend d
                          WHERE d.classid = 'pg_class'::regclass AND d.objid = cl.oid AND d.deptype = 'e')
          AND a.attnum > 0 AND NOT a.attisdropped AND a.attstorage IN ('x', 'm')
          AND a.attcompression <> 'l'
        ORDER BY cl.relname, a.attnum
    LOOP
        BEGIN
            EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET COMPRESSION lz4', c.relname, c.attname);
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            RAISE NOTICE 'left %.% on pglz: the table is busy', c.relname, c.attname;
        END;
    END LOOP;
END $$;
