package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"
)

// Ingestion of knowledge-base documents: jobs act for the document's owner;
// the ids they use come from their own rows.

// IngestTarget is what an ingestion job needs about its document.
type IngestTarget struct {
	Doc  Document
	KB   KnowledgeBase
	Data []byte
}

// StartIngest marks a document processing and returns it with its knowledge
// base and bytes. ErrNotFound: the document was deleted meanwhile.
func (d *DB) StartIngest(ctx context.Context, doc int64) (IngestTarget, error) {
	var t IngestTarget
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		// A ready document is done: a job run twice (its instance died
		// before River recorded the end) must not count its words again.
		rows, err := tx.Query(ctx, `UPDATE kb_documents d SET status = 'processing', error = '', updated_at = now(),
				chunk_size = CASE WHEN d.chunk_size = 0 THEN k.chunk_size ELSE d.chunk_size END,
				chunk_overlap = CASE WHEN d.chunk_size = 0 THEN k.chunk_overlap ELSE d.chunk_overlap END
			FROM knowledge_bases k WHERE d.id = $1 AND k.id = d.kb_id AND d.status IN ('queued', 'processing')
			RETURNING `+prefixed("d.", docCols), doc)
		if err != nil {
			return err
		}
		if t.Doc, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Document]); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, "SELECT "+kbCols+" FROM knowledge_bases WHERE id = $1", t.Doc.KBID)
		if err != nil {
			return err
		}
		if t.KB, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[KnowledgeBase]); err != nil {
			return err
		}
		return tx.QueryRow(ctx, "SELECT data FROM kb_document_files WHERE document_id = $1", doc).Scan(&t.Data)
	})
	return t, mapErr(err)
}

// NewChunk is a chunk with its embedding, ready to store.
type NewChunk struct {
	Position int
	Text     string
	Headings []string
	Heading  string
	// Title is the document's, searched with every chunk of it.
	Title string
	// Idents are the identifiers of the text kept whole as lexemes
	// (max_connections, os.path.join), which the parser would split.
	Idents    []string
	Page      int
	Embedding []float32
}

// chunkCols are the columns a chunk is copied in with; lang is the
// knowledge base's language (its text-search configuration).
var chunkCols = []string{"kb_id", "document_id", "owner_id", "generation", "position", "text", "headings", "heading",
	"title", "idents", "lang", "page", "dims", "embedding"}

// StoredPositions returns how many chunks of a document's generation are
// stored (ingestion resumes after them).
func (d *DB) StoredPositions(ctx context.Context, doc int64, generation int) (int, error) {
	var n int
	err := d.q().QueryRow(ctx, "SELECT count(*) FROM kb_chunks WHERE document_id = $1 AND generation = $2", doc, generation).Scan(&n)
	return n, err
}

// StoreChunks inserts a batch of a document's chunks (COPY) and records the
// progress, in one transaction. Positions already stored (a resumed job)
// are skipped by the caller.
func (d *DB) StoreChunks(ctx context.Context, doc Document, generation, dims int, chunks []NewChunk, progress float32) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		// The knowledge base may have switched to another embedding model
		// (a new generation) since the job started: its vectors would not
		// match. The job then starts again with the new model.
		var current int
		var lang string
		if err := tx.QueryRow(ctx, "SELECT generation, language FROM knowledge_bases WHERE id = $1 FOR SHARE",
			doc.KBID).Scan(&current, &lang); err != nil {
			return err
		}
		if current != generation {
			return ErrStaleGeneration
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"kb_chunks"}, chunkCols,
			pgx.CopyFromSlice(len(chunks), func(i int) ([]any, error) {
				c := chunks[i]
				if len(c.Embedding) != dims {
					return nil, fmt.Errorf("db: chunk %d has %d dimensions, the knowledge base %d", c.Position, len(c.Embedding), dims)
				}
				return []any{doc.KBID, doc.ID, doc.OwnerID, generation, c.Position, c.Text, c.Headings, c.Heading,
					c.Title, nonNilStrings(c.Idents), lang, c.Page, dims, pgvector.NewVector(c.Embedding)}, nil
			}))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE kb_documents SET progress = $2, chunks = (SELECT count(*) FROM kb_chunks WHERE document_id = $1 AND generation = $3),
			updated_at = now() WHERE id = $1`, doc.ID, progress, generation)
		return err
	}))
}

// ErrStaleGeneration: the knowledge base changed its embedding model while
// chunks of the old one were being stored.
var ErrStaleGeneration = errors.New("db: the knowledge base changed its embedding model meanwhile")

// SetDocumentFormat records what a document turned out to be.
func (d *DB) SetDocumentFormat(ctx context.Context, doc int64, format string) error {
	_, err := d.q().Exec(ctx, "UPDATE kb_documents SET format = $2 WHERE id = $1", doc, format)
	return err
}

// FinishIngest settles a document: ready (its words join the knowledge
// base's word counts), or failed with a message for the user.
func (d *DB) FinishIngest(ctx context.Context, doc int64, failure string) error {
	status := DocReady
	if failure != "" {
		status = DocFailed
	}
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		// The knowledge base first (kb_locks.go): its word counts change.
		kb, err := lockDocKB(ctx, tx, doc, 0, kbWrite)
		if err != nil {
			return err
		}
		var was string
		if err := tx.QueryRow(ctx, "SELECT status FROM kb_documents WHERE id = $1 FOR UPDATE", doc).Scan(&was); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE kb_documents SET status = $2, error = $3,
			progress = CASE WHEN $2 = 'ready' THEN 1 ELSE progress END, updated_at = now() WHERE id = $1`, doc, status, failure); err != nil {
			return err
		}
		if status != DocReady || was == DocReady {
			return nil
		}
		return countWords(ctx, tx, kb, doc, 1)
	}))
}

// countWords adds (sign 1) or removes (sign -1) a document's chunks to the
// knowledge base's word counts. The document's generation is the current
// one: its words do not depend on the embedding model.
func countWords(ctx context.Context, tx pgx.Tx, kb, doc int64, sign int) error {
	// ts_stat runs the inner query itself: the id is an integer, formatted.
	_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO kb_lexemes (kb_id, word, chunks)
		SELECT $1, word, $2 * ndoc FROM ts_stat('SELECT tsv FROM kb_chunks c
			WHERE c.document_id = %d AND c.generation = (SELECT generation FROM knowledge_bases WHERE id = c.kb_id)')
		ON CONFLICT (kb_id, word) DO UPDATE SET chunks = kb_lexemes.chunks + EXCLUDED.chunks`, doc), kb, sign)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE knowledge_bases SET chunks = chunks + $2 * (SELECT count(*) FROM kb_chunks c
		WHERE c.document_id = $3 AND c.generation = knowledge_bases.generation) WHERE id = $1`, kb, sign, doc)
	return err
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
