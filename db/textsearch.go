package db

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Full-text ranking: BM25 (Robertson and Zaragoza, "The Probabilistic
// Relevance Framework: BM25 and Beyond") over the chunks of one knowledge
// base, with the inverse document frequency of each word from kb_lexemes.
// A word every chunk holds weighs almost nothing instead of being dropped,
// so a question about a document's topic word still finds the document
// when that word is in all of its chunks.
//
// The term frequency comes from ts_rank of the word alone with all weights
// 1: for a word at tf positions it is H(tf)/ζ(2), with H(tf) = Σ 1/i² up to
// tf, which inverts to tf ≈ 1/(ζ(2)(1 − rank)) − 1/2 within a few percent —
// without unnesting the chunk's vector (ten times slower). A chunk's length
// is its number of distinct lexemes.
const (
	BM25K1 = 1.2 // also the passage scoring's (rag/proximity.go)
	bm25B  = 0.75
)

// textPostings bounds what a text query ranks: the words of a question, the
// rarest first, choose the candidate chunks while their chunk counts
// together stay within this (the rarest word always does); every word of the question then
// scores those candidates. A common word still counts, it just does not
// bring in every chunk holding it: ranking costs ~5 µs a candidate. On the
// dev part of the second evaluation set 3,000 ranked exactly as 20,000 did;
// over a million chunks 12,000 candidates took 350 ms (about 30 µs each).
const textPostings = 1_000

// maxTermsSQL bounds the words of a question that count (the 64 rarest):
// each is ranked on every candidate, and a pasted page of a question would
// otherwise cost seconds.
const maxTermsSQL = "64"

// maxCandidates caps the candidates when the rarest word alone is that
// common (a knowledge base of one topic asked only its topic word).
const maxCandidates = textPostings

// TextQuery is a question as the full-text side searches it.
type TextQuery struct {
	Text string // as the user wrote it
	// Idents are its identifiers kept whole (rag.Identifiers), as chunks
	// keep theirs.
	Idents []string
}

// TextHit is a chunk the full-text search found, with what each word of
// the question contributed to its score (the retrieval view shows why it
// ranked).
type TextHit struct {
	ChunkHit
	Why map[string]float64 `db:"why"`
}

// TextSearch returns the chunks of a knowledge base's current generation
// that best match the question, best BM25 score first; Score is that score.
// The question is read with the knowledge base's language, as its chunks
// were.
func (d *DB) TextSearch(ctx context.Context, user int64, kb KnowledgeBase, q TextQuery, limit int) ([]TextHit, error) {
	// NUL cannot be in a PostgreSQL string; a question may hold one.
	rows, err := d.q().Query(ctx, textSearchSQL, strings.ReplaceAll(q.Text, "\x00", ""), nonNilStrings(q.Idents), kb.ID,
		textPostings, user, kb.Generation, limit, maxCandidates, BM25K1, bm25B)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[TextHit])
}

// textSearchSQL: $1 question, $2 its identifiers, $3 knowledge base, $4
// textPostings, $5 user, $6 generation, $7 limit, $8 maxCandidates, $9 k1,
// $10 b. The access filter is in cand. The number of chunks and the
// language are read here, not taken from the caller's (maybe older) copy.
const textSearchSQL = `WITH k AS (
		SELECT greatest(chunks, 1)::float8 AS n, language::regconfig AS lang FROM knowledge_bases WHERE id = $3
	), words AS (
		SELECT DISTINCT l.word FROM k, unnest(tsvector_to_array(
			to_tsvector(k.lang, kb_search_text($1)) || array_to_tsvector($2::text[]))) l(word)
	), counted AS (
		SELECT w.word, x.chunks FROM words w JOIN kb_lexemes x ON x.kb_id = $3 AND x.word = w.word
		WHERE x.chunks > 0 ORDER BY x.chunks, w.word LIMIT ` + maxTermsSQL + `
	), terms AS (
		SELECT x.word, ln(1 + greatest(k.n - x.chunks + 0.5, 0.5) / (x.chunks + 0.5)) AS idf,
			sum(x.chunks) OVER (ORDER BY x.chunks, x.word) AS upto,
			'''' || replace(replace(x.word, '\', '\\'), '''', '\''') || '''' AS lit
		FROM counted x, k
	), sel AS (
		SELECT string_agg(lit, ' | ')::tsquery AS tsq FROM terms
		WHERE upto <= $4 OR upto = (SELECT min(upto) FROM terms)
	), cand AS (
		SELECT c.id, c.tsv, length(c.tsv) AS len
		FROM kb_chunks c JOIN kb_documents d ON d.id = c.document_id, sel
		WHERE c.tsv @@ sel.tsq AND c.kb_id = $3 AND c.owner_id = $5 AND c.generation = $6 AND d.status = 'ready'
		LIMIT $8
	), stats AS (
		SELECT greatest(avg(len), 1) AS avglen FROM cand
	), parts AS (
		SELECT cand.id, t.word, f.w
		FROM cand, stats, terms t,
			LATERAL (SELECT least(ts_rank('{1,1,1,1}', cand.tsv, t.lit::tsquery, 0), 0.999)::float8 AS r) k,
			LATERAL (SELECT 1 / (1.6449340668 * (1 - k.r)) - 0.5 AS tf) t2,
			LATERAL (SELECT t.idf * t2.tf * ($9::float8 + 1) / (t2.tf + $9::float8 * (1 - $10::float8 + $10::float8 * cand.len / stats.avglen)) AS w) f
		WHERE k.r > 0
	), top AS (
		SELECT id, sum(w) AS score FROM parts GROUP BY id ORDER BY score DESC, id LIMIT $7
	)
	SELECT ` + hitCols + `, s.score::float8 AS score,
		(SELECT jsonb_object_agg(p.word, round(p.w::numeric, 3)) FROM parts p WHERE p.id = s.id) AS why
	FROM top s JOIN kb_chunks c ON c.id = s.id JOIN kb_documents d ON d.id = c.document_id
	ORDER BY s.score DESC, c.id`
