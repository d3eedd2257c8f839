package db

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"
)

// Updating a web document whose page changed, without a moment when it
// has no chunks: the new version's chunks are built in generation 0 (which
// no knowledge base ever has, so nothing retrieves or re-embeds them) while
// the old ones answer, then SwapWebVersion replaces the old by the new in
// one transaction.

// stagedGeneration holds a web document's next version while it is read.
const stagedGeneration = 0

// BeginWebUpdate marks a web document being fetched as reading its changed
// page, dropping what an earlier attempt left staged.
func (d *DB) BeginWebUpdate(ctx context.Context, doc int64) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := lockDocKB(ctx, tx, doc, 0, kbShare); err != nil {
			return err
		}
		var ok bool
		if err := tx.QueryRow(ctx, "SELECT true FROM kb_documents WHERE id = $1 AND web_state <> '' FOR UPDATE", doc).Scan(&ok); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM kb_chunks WHERE document_id = $1 AND generation = $2", doc, stagedGeneration); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "UPDATE kb_documents SET web_state = 'updating', web_progress = 0, updated_at = now() WHERE id = $1", doc)
		return err
	}))
}

// StoreStagedChunks inserts a batch of a web document's next version
// (COPY) and records the progress of the update.
func (d *DB) StoreStagedChunks(ctx context.Context, doc Document, dims int, chunks []NewChunk, progress float32) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		// Indexed in the language the knowledge base is in (a switch waits
		// for this transaction, then indexes these chunks too); its row is
		// locked before the document's (kb_locks.go).
		var lang string
		if err := tx.QueryRow(ctx, "SELECT language FROM knowledge_bases WHERE id = $1 FOR SHARE", doc.KBID).Scan(&lang); err != nil {
			return err
		}
		if _, err := lockWebDoc(ctx, tx, doc.ID, WebUpdating); err != nil {
			return err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"kb_chunks"}, chunkCols,
			pgx.CopyFromSlice(len(chunks), func(i int) ([]any, error) {
				c := chunks[i]
				if len(c.Embedding) != dims {
					return nil, fmt.Errorf("db: chunk %d has %d dimensions, the knowledge base %d", c.Position, len(c.Embedding), dims)
				}
				return []any{doc.KBID, doc.ID, doc.OwnerID, stagedGeneration, c.Position, c.Text, c.Headings, c.Heading,
					c.Title, nonNilStrings(c.Idents), lang, c.Page, dims, pgvector.NewVector(c.Embedding)}, nil
			}))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE kb_documents SET web_progress = $2, updated_at = now() WHERE id = $1", doc.ID, progress)
		return err
	}))
}

// WebVersion is a changed page read and embedded (its chunks staged),
// ready to replace the version that answers.
type WebVersion struct {
	FetchedPage
	Format       string
	Generation   int // of the knowledge base when its chunks were embedded
	ChunkSize    int
	ChunkOverlap int
}

// SwapWebVersion makes a web document's staged chunks and content the ones
// that answer, in one transaction: the old chunks, their words in the
// knowledge base's counts and the old bytes go, the new take their place.
// ErrStaleGeneration: the knowledge base changed its embedding model since
// the chunks were embedded; *DuplicateError and ErrStorageLimit refuse the
// new content (nothing changes).
func (d *DB) SwapWebVersion(ctx context.Context, doc int64, v WebVersion) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		// The knowledge base first (kb_locks.go): its word counts change.
		if _, err := lockDocKB(ctx, tx, doc, 0, kbWrite); err != nil {
			return err
		}
		cur, err := lockWebDoc(ctx, tx, doc, WebUpdating)
		if err != nil {
			return err
		}
		var generation int
		if err := tx.QueryRow(ctx, "SELECT generation FROM knowledge_bases WHERE id = $1 FOR SHARE", cur.KBID).Scan(&generation); err != nil {
			return err
		}
		if generation != v.Generation {
			return ErrStaleGeneration
		}
		if err := checkWebContent(ctx, tx, cur, v.FetchedPage); err != nil {
			return err
		}
		if cur.Status == DocReady {
			if err := countWords(ctx, tx, cur.KBID, doc, -1); err != nil {
				return err
			}
		}
		// Any generation but the staged one: a move to another model
		// under way embeds the new chunks again when it finds them.
		if _, err := tx.Exec(ctx, "DELETE FROM kb_chunks WHERE document_id = $1 AND generation <> $2", doc, stagedGeneration); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE kb_chunks SET generation = $2 WHERE document_id = $1 AND generation = $3", doc, generation, stagedGeneration); err != nil {
			return err
		}
		if err := putWebFile(ctx, tx, doc, v.Data); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE kb_documents SET name = $2, sha256 = $3, size = $4, etag = $5, last_modified = $6,
				format = $7, chunk_size = $8, chunk_overlap = $9, fetched_at = now(), web_state = '', web_progress = 0,
				status = 'ready', error = '', progress = 1, updated_at = now(),
				chunks = (SELECT count(*) FROM kb_chunks WHERE document_id = $1 AND generation = $10)
			WHERE id = $1`, doc, v.Name, v.SHA256, len(v.Data), v.ETag, v.LastModified, v.Format, v.ChunkSize, v.ChunkOverlap, generation); err != nil {
			return err
		}
		return countWords(ctx, tx, cur.KBID, doc, 1)
	}))
}
