-- Attachments and generated media: what a file is, the text of a document
-- (read once, at upload), thumbnails, and generated media attached to a
-- later message.
ALTER TABLE attachments ADD COLUMN kind text NOT NULL DEFAULT 'document'
    CHECK (kind IN ('image', 'document', 'audio'));
ALTER TABLE attachments ADD COLUMN format text NOT NULL DEFAULT '';
ALTER TABLE attachments ADD COLUMN text text NOT NULL DEFAULT '';
ALTER TABLE attachments ADD COLUMN text_truncated boolean NOT NULL DEFAULT false;
ALTER TABLE attachments ADD COLUMN thumb_sha text NOT NULL DEFAULT '';
ALTER TABLE attachments ADD COLUMN width integer NOT NULL DEFAULT 0;
ALTER TABLE attachments ADD COLUMN height integer NOT NULL DEFAULT 0;
ALTER TABLE attachments ADD COLUMN media_id bigint REFERENCES media (id) ON DELETE SET NULL;
CREATE INDEX attachments_unsent_idx ON attachments (created_at) WHERE message_id IS NULL;
CREATE INDEX attachments_thumb_idx ON attachments (thumb_sha) WHERE thumb_sha <> '';

ALTER TABLE media ADD COLUMN thumb_sha text NOT NULL DEFAULT '';
ALTER TABLE media ADD COLUMN prompt text NOT NULL DEFAULT '';
ALTER TABLE media ADD COLUMN engine text NOT NULL DEFAULT '';
ALTER TABLE media ADD COLUMN size bigint NOT NULL DEFAULT 0;
ALTER TABLE media ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX media_sha_idx ON media (sha256) WHERE sha256 <> '';
CREATE INDEX media_thumb_idx ON media (thumb_sha) WHERE thumb_sha <> '';
