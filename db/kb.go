package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// KnowledgeBase is a set of documents in a workspace, searchable by
// meaning (embeddings) and by words (full text).
type KnowledgeBase struct {
	ID            int64   `db:"id"`
	WorkspaceID   int64   `db:"workspace_id"`
	OwnerID       int64   `db:"owner_id"`
	Name          string  `db:"name"`
	EmbedModel    string  `db:"embed_model"`
	Dims          int     `db:"dims"`
	ChunkSize     int     `db:"chunk_size"`
	ChunkOverlap  int     `db:"chunk_overlap"`
	TopK          int     `db:"top_k"`
	MinSimilarity float64 `db:"min_similarity"`
	Generation    int     `db:"generation"`
	PendingModel  string  `db:"pending_model"`
	PendingDims   int     `db:"pending_dims"`
	PendingError  string  `db:"pending_error"`
	Chunks        int     `db:"chunks"`   // chunks of ready documents
	Language      string  `db:"language"` // the text-search configuration of its chunks
	// PendingLanguage is the language the chunks are being indexed in
	// again ("" : none).
	PendingLanguage string    `db:"pending_language"`
	CreatedAt       time.Time `db:"created_at"`
	UpdatedAt       time.Time `db:"updated_at"`

	// RewriteQueries: the answering model turns each question into search
	// queries, searched besides it (rag/rewrite.go).
	RewriteQueries bool `db:"rewrite_queries"`
}

const kbCols = `id, workspace_id, owner_id, name, embed_model, dims, chunk_size, chunk_overlap, top_k,
	min_similarity, generation, pending_model, pending_dims, pending_error, chunks, language, pending_language, created_at, updated_at,
	rewrite_queries`

// Document statuses.
const (
	DocQueued     = "queued"
	DocProcessing = "processing"
	DocReady      = "ready"
	DocFailed     = "failed"
)

// Document is a file of a knowledge base.
type Document struct {
	ID       int64   `db:"id"`
	KBID     int64   `db:"kb_id"`
	OwnerID  int64   `db:"owner_id"`
	Name     string  `db:"name"`
	SHA256   string  `db:"sha256"`
	Size     int64   `db:"size"`
	Format   string  `db:"format"`
	Status   string  `db:"status"`
	Error    string  `db:"error"`
	Progress float32 `db:"progress"`
	Chunks   int     `db:"chunks"`
	// The chunking fixed when ingestion first started (0: not started).
	ChunkSize    int       `db:"chunk_size"`
	ChunkOverlap int       `db:"chunk_overlap"`
	CreatedAt    time.Time `db:"created_at"`
	UpdatedAt    time.Time `db:"updated_at"`
	WebSource              // a page fetched from the web (kb_web.go)
}

const docCols = "id, kb_id, owner_id, name, sha256, size, format, status, error, progress, chunks, chunk_size, chunk_overlap, created_at, updated_at, " + webDocCols

// KBInput is what a user sets on a knowledge base.
type KBInput struct {
	Name          string
	EmbedModel    string
	Dims          int
	ChunkSize     int
	ChunkOverlap  int
	TopK          int
	MinSimilarity float64

	RewriteQueries bool
}

// CreateKB adds a knowledge base to one of the user's active workspaces. A
// name already used in the workspace is ErrConflict.
func (d *DB) CreateKB(ctx context.Context, user, workspace int64, in KBInput) (KnowledgeBase, error) {
	var kb KnowledgeBase
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `INSERT INTO knowledge_bases (workspace_id, owner_id, name, embed_model, dims)
			SELECT id, owner_id, $3, $4, $5 FROM workspaces WHERE id = $1 AND owner_id = $2 AND status = 'active'
			RETURNING `+kbCols, workspace, user, in.Name, in.EmbedModel, in.Dims)
		if err != nil {
			return err
		}
		if kb, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[KnowledgeBase]); err != nil {
			return err
		}
		return ensureVectorIndex(ctx, tx, in.Dims)
	})
	return kb, mapErr(err)
}

// MaxDims is the largest embedding Weft indexes. pgvector's HNSW index takes
// 2,000 dimensions of its vector type and 4,000 of halfvec, the index's
// type now; 2,000 stays the limit users were told.
const MaxDims = 2000

// VectorIndexName is the partial HNSW index of one embedding dimension.
// (Before migration 015 they were kb_chunks_hnsw_N, over vector(N).)
func VectorIndexName(dims int) string { return fmt.Sprintf("kb_chunks_halfvec_%d", dims) }

// VectorIndexWith are the HNSW build parameters. Migration 015 creates the
// index with the same ones: keep them equal.
const VectorIndexWith = "m = 16, ef_construction = 40"

// VectorIndexDDL creates the partial HNSW index of one embedding dimension
// (cosine distance). The vectors are indexed as halfvec: half the bytes per
// vector, so half the memory the graph reads while a chunk is inserted or a
// query walks it, for a recall that stays within noise of the full
// precision (bench/rag measures it: docs/PERFORMANCE.md). Every retrieval
// query for that dimension names the same expression and predicate
// (VectorSearchSQL), so it is used.
func VectorIndexDDL(dims int) string {
	// dims is an int: formatting it into DDL cannot inject anything.
	return fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %[1]s ON kb_chunks
		USING hnsw ((embedding::halfvec(%[2]d)) halfvec_cosine_ops) WITH (%[3]s) WHERE dims = %[2]d`,
		VectorIndexName(dims), dims, VectorIndexWith)
}

// ensureVectorIndex creates the vector index for one embedding dimension if
// it does not exist yet.
func ensureVectorIndex(ctx context.Context, q querier, dims int) error {
	if dims <= 0 || dims > MaxDims {
		return fmt.Errorf("db: embedding dimension %d out of range", dims)
	}
	_, err := q.Exec(ctx, VectorIndexDDL(dims))
	return err
}

// KBs lists the knowledge bases of one of the user's workspaces.
func (d *DB) KBs(ctx context.Context, user, workspace int64) ([]KnowledgeBase, error) {
	rows, err := d.q().Query(ctx, "SELECT "+kbCols+` FROM knowledge_bases
		WHERE workspace_id = $1 AND owner_id = $2 ORDER BY lower(name), id`, workspace, user)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[KnowledgeBase])
}

// KB returns one of the user's knowledge bases.
func (d *DB) KB(ctx context.Context, user, id int64) (KnowledgeBase, error) {
	return oneRow[KnowledgeBase](ctx, d.q(), "SELECT "+kbCols+" FROM knowledge_bases WHERE id = $1 AND owner_id = $2", id, user)
}

// RenameKB renames one of the user's knowledge bases.
func (d *DB) RenameKB(ctx context.Context, user, id int64, name string) error {
	return execOne(ctx, d.q(), "UPDATE knowledge_bases SET name = $3, updated_at = now() WHERE id = $1 AND owner_id = $2", id, user, name)
}

// UpdateKBSettings stores chunking and retrieval settings. New chunk sizes
// apply to documents added afterwards.
func (d *DB) UpdateKBSettings(ctx context.Context, user, id int64, in KBInput) error {
	return execOne(ctx, d.q(), `UPDATE knowledge_bases SET chunk_size = $3, chunk_overlap = $4, top_k = $5,
		min_similarity = $6, rewrite_queries = $7, updated_at = now() WHERE id = $1 AND owner_id = $2`,
		id, user, in.ChunkSize, in.ChunkOverlap, in.TopK, in.MinSimilarity, in.RewriteQueries)
}

// ThreadRef names a thread (for "these threads use it" confirmations).
type ThreadRef struct {
	ID    int64  `db:"id"`
	Title string `db:"title"`
}

// KBThreads lists the user's threads a knowledge base is attached to.
func (d *DB) KBThreads(ctx context.Context, user, kb int64) ([]ThreadRef, error) {
	rows, err := d.q().Query(ctx, `SELECT t.id, t.title FROM thread_kbs tk JOIN threads t ON t.id = tk.thread_id
		WHERE tk.kb_id = $1 AND t.owner_id = $2 ORDER BY t.last_activity_at DESC`, kb, user)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[ThreadRef])
}

// DeleteKB removes a knowledge base with its documents, files, chunks and
// vectors in one transaction; the threads that used it are detached (never
// deleted) and returned.
func (d *DB) DeleteKB(ctx context.Context, user, id int64) ([]ThreadRef, error) {
	var detached []ThreadRef
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var ok bool
		if err := tx.QueryRow(ctx, "SELECT true FROM knowledge_bases WHERE id = $1 AND owner_id = $2 FOR UPDATE", id, user).Scan(&ok); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT t.id, t.title FROM thread_kbs tk JOIN threads t ON t.id = tk.thread_id
			WHERE tk.kb_id = $1 ORDER BY t.id`, id)
		if err != nil {
			return err
		}
		if detached, err = pgx.CollectRows(rows, pgx.RowToStructByName[ThreadRef]); err != nil {
			return err
		}
		// Chunks, documents, files and attachments to threads cascade.
		_, err = tx.Exec(ctx, "DELETE FROM knowledge_bases WHERE id = $1", id)
		return err
	})
	return detached, mapErr(err)
}

// NewDocument is an uploaded file.
type NewDocument struct {
	Name   string
	SHA256 string
	Data   []byte
	// MaxUserBytes refuses the document (ErrStorageLimit) when it would
	// take what its owner stores over this many bytes (0: no limit).
	MaxUserBytes int64
}

// ErrDuplicate marks a document whose content the knowledge base already has.
var ErrDuplicate = fmt.Errorf("db: duplicate document")

// AddDocument stores an uploaded file as a queued document and calls
// enqueue in the same transaction, so the ingestion job exists exactly when
// the document does. The same content twice is ErrDuplicate (with the
// existing document).
func (d *DB) AddDocument(ctx context.Context, user, kb int64, in NewDocument, enqueue func(tx pgx.Tx, doc Document) error) (Document, error) {
	var doc Document
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `INSERT INTO kb_documents (kb_id, owner_id, name, sha256, size)
			SELECT id, owner_id, $3, $4, $5 FROM knowledge_bases WHERE id = $1 AND owner_id = $2
			ON CONFLICT (kb_id, sha256) DO NOTHING
			RETURNING `+docCols, kb, user, in.Name, in.SHA256, len(in.Data))
		if err != nil {
			return err
		}
		doc, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Document])
		if errors.Is(err, pgx.ErrNoRows) {
			// Either the knowledge base is not the user's, or a duplicate.
			rows, err := tx.Query(ctx, `SELECT `+prefixed("d.", docCols)+` FROM kb_documents d
				JOIN knowledge_bases k ON k.id = d.kb_id WHERE d.kb_id = $1 AND k.owner_id = $2 AND d.sha256 = $3`, kb, user, in.SHA256)
			if err != nil {
				return err
			}
			if doc, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Document]); err != nil {
				return err
			}
			return ErrDuplicate
		}
		if err != nil {
			return err
		}
		if in.MaxUserBytes > 0 {
			// Under the user's row lock, so that concurrent uploads (on any
			// instance) cannot together pass the limit.
			if _, err := tx.Exec(ctx, "SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE", user); err != nil {
				return err
			}
			used, err := storedBytes(ctx, tx, user)
			if err != nil {
				return err
			}
			if used+int64(len(in.Data)) > in.MaxUserBytes {
				return ErrStorageLimit
			}
		}
		if _, err := tx.Exec(ctx, "INSERT INTO kb_document_files (document_id, data) VALUES ($1, $2)", doc.ID, in.Data); err != nil {
			return err
		}
		return enqueue(tx, doc)
	})
	return doc, mapErr(err)
}

// Documents lists a knowledge base's documents, newest first.
func (d *DB) Documents(ctx context.Context, user, kb int64) ([]Document, error) {
	rows, err := d.q().Query(ctx, "SELECT "+docCols+` FROM kb_documents WHERE kb_id = $1 AND owner_id = $2
		ORDER BY id DESC`, kb, user)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Document])
}

// Document returns one of the user's documents.
func (d *DB) Document(ctx context.Context, user, id int64) (Document, error) {
	return oneRow[Document](ctx, d.q(), "SELECT "+docCols+" FROM kb_documents WHERE id = $1 AND owner_id = $2", id, user)
}

// DeleteLockTimeout is how long DeleteDocument, a request someone waits
// for, waits for its knowledge base's row: a language switch holds it while
// it indexes every chunk again (minutes on a large knowledge base). After
// it, ErrBusy.
var DeleteLockTimeout = 5 * time.Second

// DeleteDocument removes a document with its file and chunks (and its
// words from the knowledge base's counts). ErrBusy: its knowledge base is
// being indexed again for a new language.
func (d *DB) DeleteDocument(ctx context.Context, user, id int64) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", DeleteLockTimeout.Milliseconds())); err != nil {
			return err
		}
		// The knowledge base first (kb_locks.go): its word counts change.
		kb, err := lockDocKB(ctx, tx, id, user, kbWrite)
		if err != nil {
			return err
		}
		var status string
		if err := tx.QueryRow(ctx, "SELECT status FROM kb_documents WHERE id = $1 AND owner_id = $2 FOR UPDATE", id, user).Scan(&status); err != nil {
			return err
		}
		if status == DocReady {
			if err := countWords(ctx, tx, kb, id, -1); err != nil {
				return err
			}
		}
		return execOne(ctx, tx, "DELETE FROM kb_documents WHERE id = $1", id)
	}))
}

// RequeueDocument puts a failed document back in the queue (enqueue runs in
// the same transaction).
func (d *DB) RequeueDocument(ctx context.Context, user, id int64, enqueue func(tx pgx.Tx, doc Document) error) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE kb_documents SET status = 'queued', error = '', progress = 0, updated_at = now()
			WHERE id = $1 AND owner_id = $2 AND status = 'failed' RETURNING `+docCols, id, user)
		if err != nil {
			return err
		}
		doc, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Document])
		if err != nil {
			return err
		}
		return enqueue(tx, doc)
	}))
}
