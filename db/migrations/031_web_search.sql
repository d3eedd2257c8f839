-- Web search (issue 19): a thread's "Search the web" switch, kept like its
-- agent mode and knowledge-base attachments so that every later message of
-- the thread is searched until it is switched off. The search service
-- itself is an instance setting (settings rows web_search_*).
ALTER TABLE threads ADD COLUMN web_search boolean NOT NULL DEFAULT false;
