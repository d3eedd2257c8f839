package db

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// TermPosition is where one word of a question occurs in one chunk: the
// word's positions in the chunk's full-text vector (the title, the heading
// path, then the text, counted in words) and its inverse document
// frequency in the knowledge base, as BM25 weighs it.
type TermPosition struct {
	ChunkID   int64   `db:"id"`
	Word      string  `db:"word"`
	IDF       float64 `db:"idf"`
	Positions []int32 `db:"positions"`
	// HeadEnd is the last position of the chunk's title and heading path
	// (its text's words come after it).
	HeadEnd int32 `db:"head_end"`
}

// TermPositions returns, for the given chunks of one of the user's
// knowledge bases, the positions of the question's words (read with the
// knowledge base's language, as TextSearch reads it). Chunks of other users
// or knowledge bases are left out. It reads only the listed chunks'
// vectors: its cost grows with their number, not with the knowledge base.
func (d *DB) TermPositions(ctx context.Context, user int64, kb KnowledgeBase, q TextQuery, chunks []int64) ([]TermPosition, error) {
	if len(chunks) == 0 {
		return nil, nil
	}
	rows, err := d.q().Query(ctx, termPositionsSQL, strings.ReplaceAll(q.Text, "\x00", ""), nonNilStrings(q.Idents), kb.ID, user, chunks)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[TermPosition])
}

// termPositionsSQL: $1 question, $2 its identifiers, $3 knowledge base, $4
// user, $5 chunk ids. Identifiers kept whole have no positions (they are
// added to the vector as an array) and are left out. The title and heading
// path come first in a chunk's vector (kb_tsvector of title, heading and
// text): head_end, the last of their positions, is worked out once a chunk.
const termPositionsSQL = `WITH k AS (
		SELECT greatest(chunks, 1)::float8 AS n, language::regconfig AS lang FROM knowledge_bases WHERE id = $3
	), words AS (
		SELECT DISTINCT l.word FROM k, unnest(tsvector_to_array(
			to_tsvector(k.lang, kb_search_text($1)) || array_to_tsvector($2::text[]))) l(word)
	), terms AS (
		SELECT w.word, ln(1 + greatest(k.n - x.chunks + 0.5, 0.5) / (x.chunks + 0.5)) AS idf
		FROM words w JOIN kb_lexemes x ON x.kb_id = $3 AND x.word = w.word, k
		WHERE x.chunks > 0 ORDER BY x.chunks, w.word LIMIT ` + maxTermsSQL + `
	)
	SELECT c.id, t.word, t.idf::float8 AS idf, u.positions::int4[] AS positions, h.head_end
	FROM kb_chunks c
		CROSS JOIN LATERAL (SELECT coalesce(max(p), 0)::int4 AS head_end
			FROM unnest(to_tsvector(c.lang::regconfig, kb_search_text(c.title || ' ' || c.heading))) v, unnest(v.positions) p) h
		CROSS JOIN LATERAL unnest(c.tsv) u JOIN terms t ON t.word = u.lexeme
	WHERE c.id = ANY($5) AND c.kb_id = $3 AND c.owner_id = $4 AND u.positions IS NOT NULL
	ORDER BY c.id, t.word`
