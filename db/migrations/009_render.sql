-- The rendered HTML of a final message's body, kept so that a page view
-- does not render markdown again. It is written only by Weft's renderer
-- (views), never taken from an import, and it is valid only for the
-- renderer version that made it (body_html_version). Changing the text or
-- the cited sources of a message forgets it, whichever query does so.
ALTER TABLE messages ADD COLUMN body_html text;
ALTER TABLE messages ADD COLUMN body_html_version integer NOT NULL DEFAULT 0;

CREATE FUNCTION messages_forget_body_html() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.body_html IS NOT DISTINCT FROM OLD.body_html
       AND (NEW.content IS DISTINCT FROM OLD.content
            OR NEW.metadata -> 'sources' IS DISTINCT FROM OLD.metadata -> 'sources') THEN
        NEW.body_html := NULL;
        NEW.body_html_version := 0;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER messages_forget_body_html BEFORE UPDATE OF content, metadata ON messages
    FOR EACH ROW EXECUTE FUNCTION messages_forget_body_html();
