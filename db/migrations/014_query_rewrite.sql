-- Query rewriting, a knowledge-base setting (off by default): before a
-- search, the answering model turns the question into a few search
-- queries, searched besides the question itself (rag/rewrite.go).
ALTER TABLE knowledge_bases ADD COLUMN rewrite_queries boolean NOT NULL DEFAULT false;
