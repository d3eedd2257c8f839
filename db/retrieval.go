package db

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"
)

// Source is a chunk retrieved for a rag answer, numbered as the model is
// asked to cite it ([n]). Stored on the answer's metadata.sources.
type Source struct {
	N          int      `json:"n"`
	ChunkID    int64    `json:"chunk_id"`
	DocumentID int64    `json:"document_id"`
	KBID       int64    `json:"kb_id"`
	KB         string   `json:"kb"`
	Document   string   `json:"document"`
	Page       int      `json:"page,omitempty"`
	Headings   []string `json:"headings,omitempty"`
	Text       string   `json:"text"`
	// Position is the chunk's in its document; Joined are the chunks after
	// (or before) it that continue the same section, joined into this
	// source's text.
	Position   int     `json:"position,omitempty"`
	Joined     []int64 `json:"joined,omitempty"`
	VectorRank int     `json:"vector_rank,omitempty"` // 1-based; 0: not found by the vector search
	TextRank   int     `json:"text_rank,omitempty"`   // 1-based; 0: not found by the text search
	Similarity float64 `json:"similarity"`            // cosine similarity to the question
	TextScore  float64 `json:"text_score,omitempty"`
	// TextWhy is what each word of the question added to TextScore.
	TextWhy map[string]float64 `json:"text_why,omitempty"`
	Fused   float64            `json:"fused"` // TextPart + VectorPart + PassagePart
	// TextPart and VectorPart are what each side added to Fused (its
	// scaled score, the vector's weighted).
	TextPart   float64 `json:"text_part,omitempty"`
	VectorPart float64 `json:"vector_part,omitempty"`
	// PassageScore is the BM25 score of the chunk's best window of words
	// (rag's passage scoring); PassagePart what it added to Fused.
	PassageScore float64 `json:"passage_score,omitempty"`
	PassagePart  float64 `json:"passage_part,omitempty"`
	Cited        bool    `json:"cited,omitempty"`
	// URL is a web source's page (issue 19: web search; KBID and
	// DocumentID are 0). Snippet: Text is the search service's snippet,
	// because the page itself could not be read.
	URL     string `json:"url,omitempty"`
	Snippet bool   `json:"snippet,omitempty"`
}

// ChunkHit is a chunk found by one of the searches.
type ChunkHit struct {
	ChunkID    int64    `db:"id"`
	DocumentID int64    `db:"document_id"`
	KBID       int64    `db:"kb_id"`
	Document   string   `db:"document"`
	Text       string   `db:"text"`
	Headings   []string `db:"headings"`
	Page       int      `db:"page"`
	Position   int      `db:"position"`
	// Score: for the vector search the cosine similarity (1 − distance),
	// for the text search ts_rank.
	Score float64 `db:"score"`
}

const hitCols = `c.id, c.document_id, c.kb_id, d.name AS document, c.text, c.headings, c.page, c.position`

// VectorSearch returns the chunks of a knowledge base's current generation
// nearest to the query embedding, nearest first. The access filter (owner,
// knowledge base, generation) is inside the query; HNSW iterative scans
// (pgvector 0.8) keep walking the index until enough rows pass it, so a
// filter never starves the result.
func (d *DB) VectorSearch(ctx context.Context, user int64, kb KnowledgeBase, query []float32, limit int) ([]ChunkHit, error) {
	if len(query) != kb.Dims {
		return nil, fmt.Errorf("db: query has %d dimensions, the knowledge base %d", len(query), kb.Dims)
	}
	var hits []ChunkHit
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		// A generic plan cached for any knowledge base could pick the HNSW
		// index for a small one; plan for these very values.
		for _, set := range []string{"SET LOCAL hnsw.iterative_scan = strict_order", "SET LOCAL plan_cache_mode = force_custom_plan"} {
			if _, err := tx.Exec(ctx, set); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL hnsw.ef_search = %d", EfSearch(limit))); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, VectorSearchSQL(kb.Dims), pgvector.NewVector(query), kb.ID, user, kb.Generation, limit)
		if err != nil {
			return err
		}
		hits, err = pgx.CollectRows(rows, pgx.RowToStructByName[ChunkHit])
		return err
	})
	return hits, err
}

// EfSearch is the HNSW candidate list a vector query of limit rows walks
// with (pgvector takes at most 1,000). Measured by bench/rag against an
// exact scan (docs/PERFORMANCE.md, "Ingestion and the vector index") on the
// synthetic corpus, whose hashed vectors are hard for HNSW: for Weft's 60
// candidates over 1M chunks, 120 found 67 % of a question's true 10
// nearest at p50 7.8 ms, 200 finds 72 % at about 10 ms, 400 78 % at 43 ms.
// 200: the query stays within the hybrid budget (p95 < 50 ms) at 1M.
func EfSearch(limit int) int { return min(1000, max(200, 3*limit)) }

// VectorSearchSQL is the vector query for one dimension (exported for the
// EXPLAIN test): its ORDER BY and WHERE match the partial HNSW index of that
// dimension (VectorIndexDDL), over halfvec. The query vector comes as a
// vector and is cast, as the stored ones are.
func VectorSearchSQL(dims int) string {
	return fmt.Sprintf(`SELECT `+hitCols+`, 1 - (c.embedding::halfvec(%[1]d) <=> $1::vector(%[1]d)::halfvec(%[1]d)) AS score
		FROM kb_chunks c JOIN kb_documents d ON d.id = c.document_id
		WHERE c.dims = %[1]d AND c.kb_id = $2 AND c.owner_id = $3 AND c.generation = $4 AND d.status = 'ready'
		ORDER BY c.embedding::halfvec(%[1]d) <=> $1::vector(%[1]d)::halfvec(%[1]d) LIMIT $5`, dims)
}

// SetThreadKBs attaches exactly these knowledge bases to one of the user's
// threads; ids that are not the user's, or belong to another workspace, are
// ErrNotFound.
func (d *DB) SetThreadKBs(ctx context.Context, user, thread int64, kbs []int64) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		return setThreadKBs(ctx, tx, user, thread, kbs)
	}))
}

func setThreadKBs(ctx context.Context, tx pgx.Tx, user, thread int64, kbs []int64) error {
	var ws int64
	if err := tx.QueryRow(ctx, "SELECT workspace_id FROM threads WHERE id = $1 AND owner_id = $2", thread, user).Scan(&ws); err != nil {
		return err
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM knowledge_bases WHERE id = ANY($1) AND owner_id = $2 AND workspace_id = $3`,
		kbs, user, ws).Scan(&n); err != nil {
		return err
	}
	if n != len(uniq(kbs)) {
		return ErrNotFound
	}
	if _, err := tx.Exec(ctx, "DELETE FROM thread_kbs WHERE thread_id = $1 AND NOT (kb_id = ANY($2))", thread, kbs); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO thread_kbs (thread_id, kb_id) SELECT $1, k FROM unnest($2::bigint[]) k
		ON CONFLICT DO NOTHING`, thread, kbs)
	return err
}

func uniq(ids []int64) map[int64]bool {
	m := map[int64]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// ThreadKBs lists the knowledge bases attached to one of the user's threads.
func (d *DB) ThreadKBs(ctx context.Context, user, thread int64) ([]KnowledgeBase, error) {
	rows, err := d.q().Query(ctx, "SELECT "+prefixed("k.", kbCols)+` FROM thread_kbs tk
		JOIN knowledge_bases k ON k.id = tk.kb_id JOIN threads t ON t.id = tk.thread_id
		WHERE tk.thread_id = $1 AND t.owner_id = $2 AND k.owner_id = $2 ORDER BY lower(k.name)`, thread, user)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[KnowledgeBase])
}

// SetSources stores on an answer the sources retrieved for it (before the
// model is asked), as metadata.sources.
func (d *DB) SetSources(ctx context.Context, msg int64, sources any) error {
	b, err := json.Marshal(sources)
	if err != nil {
		return err
	}
	_, err = d.q().Exec(ctx, `UPDATE messages SET metadata = metadata || jsonb_build_object('sources', $2::jsonb)
		WHERE id = $1`, msg, b)
	return err
}

// --- re-embedding with another model ---

// StartReembed records the model a knowledge base moves to and calls
// enqueue in the same transaction. A move already in progress is
// ErrConflict.
func (d *DB) StartReembed(ctx context.Context, user, kb int64, model string, dims int, enqueue func(tx pgx.Tx, kb KnowledgeBase) error) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		var pending string
		if err := tx.QueryRow(ctx, "SELECT pending_model FROM knowledge_bases WHERE id = $1 AND owner_id = $2 FOR UPDATE", kb, user).Scan(&pending); err != nil {
			return err
		}
		if pending != "" {
			return ErrConflict
		}
		rows, err := tx.Query(ctx, `UPDATE knowledge_bases SET pending_model = $3, pending_dims = $4, pending_error = '', updated_at = now()
			WHERE id = $1 AND owner_id = $2 RETURNING `+kbCols, kb, user, model, dims)
		if err != nil {
			return err
		}
		k, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[KnowledgeBase])
		if err != nil {
			return err
		}
		if err := ensureVectorIndex(ctx, tx, dims); err != nil {
			return err
		}
		return enqueue(tx, k)
	}))
}

// KBForJob returns a knowledge base by id, for a background job acting for
// its owner.
func (d *DB) KBForJob(ctx context.Context, id int64) (KnowledgeBase, error) {
	rows, err := d.q().Query(ctx, "SELECT "+kbCols+" FROM knowledge_bases WHERE id = $1", id)
	if err != nil {
		return KnowledgeBase{}, err
	}
	kb, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[KnowledgeBase])
	return kb, mapErr(err)
}

// PendingChunk is a chunk of the current generation still to be embedded
// with the knowledge base's new model.
type PendingChunk struct {
	ID         int64    `db:"id"`
	DocumentID int64    `db:"document_id"`
	OwnerID    int64    `db:"owner_id"`
	Position   int      `db:"position"`
	Text       string   `db:"text"`
	Headings   []string `db:"headings"`
	Heading    string   `db:"heading"`
	Title      string   `db:"title"`
	Idents     []string `db:"idents"`
	Page       int      `db:"page"`
}

// ChunksToReembed returns up to limit chunks of the current generation,
// after the chunk id after (keyset: each batch costs its own size), that have
// no counterpart in the next one yet.
func (d *DB) ChunksToReembed(ctx context.Context, kb KnowledgeBase, after int64, limit int) ([]PendingChunk, error) {
	rows, err := d.q().Query(ctx, `SELECT c.id, c.document_id, c.owner_id, c.position, c.text, c.headings, c.heading,
			c.title, c.idents, c.page
		FROM kb_chunks c WHERE c.kb_id = $1 AND c.generation = $2 AND c.id > $3
		  AND NOT EXISTS (SELECT 1 FROM kb_chunks n WHERE n.document_id = c.document_id AND n.generation = $2 + 1 AND n.position = c.position)
		ORDER BY c.id LIMIT $4`, kb.ID, kb.Generation, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[PendingChunk])
}

// StoreReembedded inserts chunks of the next generation, indexed in the
// knowledge base's language: read under its row's lock (kb_locks.go), so a
// language switch waits for them and indexes them too, or they are stored
// after it in the new language.
func (d *DB) StoreReembedded(ctx context.Context, kb KnowledgeBase, chunks []PendingChunk, vectors [][]float32) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		var lang string
		if err := tx.QueryRow(ctx, "SELECT language FROM knowledge_bases WHERE id = $1 FOR "+kbShare, kb.ID).Scan(&lang); err != nil {
			return err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"kb_chunks"}, chunkCols,
			pgx.CopyFromSlice(len(chunks), func(i int) ([]any, error) {
				c := chunks[i]
				if len(vectors[i]) != kb.PendingDims {
					return nil, fmt.Errorf("db: %d dimensions from the new model, expected %d", len(vectors[i]), kb.PendingDims)
				}
				return []any{kb.ID, c.DocumentID, c.OwnerID, kb.Generation + 1, c.Position, c.Text, c.Headings, c.Heading,
					c.Title, nonNilStrings(c.Idents), lang, c.Page, kb.PendingDims, pgvector.NewVector(vectors[i])}, nil
			}))
		return err
	}))
}

// SwapGeneration makes the next generation the one retrieved, in one
// transaction, if every chunk has its counterpart; it reports whether it
// swapped (false: chunks arrived meanwhile, embed them first).
func (d *DB) SwapGeneration(ctx context.Context, kbID int64) (bool, error) {
	swapped := false
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT "+kbCols+" FROM knowledge_bases WHERE id = $1 FOR UPDATE", kbID)
		if err != nil {
			return err
		}
		kb, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[KnowledgeBase])
		if err != nil {
			return err
		}
		var missing bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kb_chunks c WHERE c.kb_id = $1 AND c.generation = $2
			AND NOT EXISTS (SELECT 1 FROM kb_chunks n WHERE n.document_id = c.document_id AND n.generation = $2 + 1 AND n.position = c.position))
			OR EXISTS (SELECT 1 FROM kb_chunks n WHERE n.kb_id = $1 AND n.generation = $2 + 1 AND n.dims <> $3)`,
			kb.ID, kb.Generation, kb.PendingDims).Scan(&missing); err != nil {
			return err
		}
		if missing {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE knowledge_bases SET generation = generation + 1, embed_model = pending_model,
			dims = pending_dims, pending_model = '', pending_dims = 0, updated_at = now() WHERE id = $1`, kb.ID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "DELETE FROM kb_chunks WHERE kb_id = $1 AND generation = $2", kb.ID, kb.Generation)
		swapped = err == nil
		return err
	})
	return swapped, mapErr(err)
}

// FailReembed abandons a move to another model (its partial generation is
// removed) and records why.
func (d *DB) FailReembed(ctx context.Context, kbID int64, reason string) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		if err := lockKB(ctx, tx, kbID, kbWrite); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM kb_chunks WHERE kb_id = $1
			AND generation = (SELECT generation + 1 FROM knowledge_bases WHERE id = $1)`, kbID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE knowledge_bases SET pending_model = '', pending_dims = 0, pending_error = $2,
			updated_at = now() WHERE id = $1`, kbID, reason)
		return err
	}))
}
