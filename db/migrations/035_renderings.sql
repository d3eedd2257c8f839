-- The rendered HTML of final messages moves from messages (body_html,
-- migration 009) to a table of its own. Storing a rendering updated the
-- message row: never a HOT update (the rows are large and the pages full),
-- so every rendering inserted the message again into all of its indexes,
-- the trigram and full-text GIN indexes included, extracting every
-- trigram and word of the answer a second time right after its final
-- write (PostgreSQL CPU of 1,000 answers finishing together: ~3 ms each).
-- A rendering is now one row here, under its primary key only.
--
-- It is valid for the renderer version that made it. Changing the text or
-- the cited sources of a message forgets it, whichever query does so (the
-- trigger); db.StoreRenderedBody locks the message row while it stores, so
-- a change committing meanwhile either waits for it (and then forgets it)
-- or makes it store nothing.
CREATE TABLE message_renderings (
    message_id bigint PRIMARY KEY REFERENCES messages ON DELETE CASCADE,
    version    integer NOT NULL,
    html       text NOT NULL
);

INSERT INTO message_renderings (message_id, version, html)
    SELECT id, body_html_version, body_html FROM messages
    WHERE body_html IS NOT NULL AND body_html_version > 0;

DROP TRIGGER messages_forget_body_html ON messages;
DROP FUNCTION messages_forget_body_html();
ALTER TABLE messages DROP COLUMN body_html, DROP COLUMN body_html_version;

CREATE FUNCTION messages_forget_rendering() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM message_renderings WHERE message_id = NEW.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER messages_forget_rendering AFTER UPDATE OF content, metadata ON messages
    FOR EACH ROW
    WHEN (NEW.content IS DISTINCT FROM OLD.content
          OR NEW.metadata -> 'sources' IS DISTINCT FROM OLD.metadata -> 'sources')
    EXECUTE FUNCTION messages_forget_rendering();
