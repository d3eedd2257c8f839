-- What a user stores is counted per user (the storage limit): their
-- attachments' distinct files and their knowledge-base documents.
CREATE INDEX attachments_owner_sha_idx ON attachments (owner_id, sha256);
CREATE INDEX kb_documents_owner_idx ON kb_documents (owner_id);
