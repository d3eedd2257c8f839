package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"weft/db"
	"weft/extract"
	"weft/internal/fakeollama"
	"weft/rag"
)

// words draws the synthetic corpus's words from a Zipf distribution over a
// 50,000-word vocabulary, as natural text does (a few words everywhere, most
// words rare).
type words struct{ z *rand.Zipf }

func newWords(r *rand.Rand) words { return words{rand.NewZipf(r, 1.1, 2, 49_999)} }

func (w words) next() string { return fmt.Sprintf("w%d", w.z.Uint64()) }

func (w words) sentence(n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = w.next()
	}
	return strings.Join(out, " ") + "."
}

// benchmark measures ingestion without the model's embedding time (the
// vectors are computed before the clock starts) and retrieval latency over
// a knowledge base of n chunks.
func benchmark(ctx context.Context, w io.Writer, e *env, model string, n, queries int, bulk bool) error {
	dims, err := e.svc.Dimensions(ctx, model)
	if err != nil {
		return err
	}
	kb, err := e.store.CreateKB(ctx, e.user.ID, e.ws.ID, db.KBInput{Name: "bench", EmbedModel: model, Dims: dims})
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(1, 2))
	vocab := newWords(r)
	index := fmt.Sprintf("kb_chunks_hnsw_%d", dims)
	if bulk {
		// Loading a million chunks with the HNSW index maintained row by row
		// takes hours on two cores: load first, build the index once.
		if _, err := e.store.Pool.Exec(ctx, "DROP INDEX "+index); err != nil {
			return err
		}
	}
	const perDoc = 500
	fmt.Fprintf(w, "Knowledge base benchmark — %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "%d chunks of about 300 characters (words from a Zipf distribution over 50,000), %d per document, %d-dimension vectors (%s), HNSW index maintained while inserting; 4-word questions\n\n",
		n, perDoc, dims, model)
	var readSplit, store time.Duration
	stored := 0
	for d := 0; stored < n; d++ {
		var md strings.Builder
		fmt.Fprintf(&md, "# Document %d\n\n", d)
		for s := 0; s < perDoc && stored+s < n; s++ {
			fmt.Fprintf(&md, "## Section %d\n\n%s %s\n\n", s, vocab.sentence(20), vocab.sentence(20))
		}
		data := []byte(md.String())
		t0 := time.Now()
		blocks, err := extract.ReadInProcess(ctx, rag.FormatMarkdown, data, extract.Limits{}) // the repository's own corpus: trusted
		if err != nil {
			return err
		}
		chunks := rag.Split(blocks, rag.ChunkOptions{Size: kb.ChunkSize, Overlap: kb.ChunkOverlap})
		readSplit += time.Since(t0)
		rows := make([]db.NewChunk, len(chunks))
		for i, c := range chunks {
			rows[i] = db.NewChunk{Position: c.Position, Text: c.Text, Headings: c.Headings, Heading: strings.Join(c.Headings, " › "),
				Page: c.Page, Embedding: fakeollama.Vector(rag.EmbedText("", c.Headings, c.Text), dims)}
		}
		doc, err := e.store.AddDocument(ctx, e.user.ID, kb.ID, db.NewDocument{Name: fmt.Sprintf("doc%d.md", d), SHA256: fmt.Sprint("bench", d), Data: data},
			func(pgx.Tx, db.Document) error { return nil })
		if err != nil {
			return err
		}
		t1 := time.Now()
		for i := 0; i < len(rows); i += 256 {
			if err := e.store.StoreChunks(ctx, doc, kb.Generation, dims, rows[i:min(i+256, len(rows))], 1); err != nil {
				return err
			}
		}
		// As the ingestion job does: the document is ready and its words
		// join the knowledge base's counts.
		if err := e.store.FinishIngest(ctx, doc.ID, ""); err != nil {
			return err
		}
		store += time.Since(t1)
		stored += len(rows)
		if d%20 == 19 {
			fmt.Fprintf(w, "  … %d chunks stored\n", stored)
		}
	}
	fmt.Fprintf(w, "ingest (excluding embedding): read+chunk %.0f chunks/s, store (COPY + indexes) %.0f chunks/s, together %.0f chunks/s\n",
		float64(stored)/readSplit.Seconds(), float64(stored)/store.Seconds(), float64(stored)/(readSplit+store).Seconds())
	if bulk {
		t0 := time.Now()
		conn, err := e.store.Pool.Acquire(ctx)
		if err != nil {
			return err
		}
		for _, q := range []string{"SET maintenance_work_mem = '2GB'", "SET max_parallel_maintenance_workers = 1",
			fmt.Sprintf("CREATE INDEX %[1]s ON kb_chunks USING hnsw ((embedding::vector(%[2]d)) vector_cosine_ops) WHERE dims = %[2]d", index, dims)} {
			if _, err := conn.Exec(ctx, q); err != nil {
				conn.Release()
				return err
			}
		}
		conn.Release()
		fmt.Fprintf(w, "HNSW index built after loading (bulk mode, so the store rate above excludes it): %.0f s\n", time.Since(t0).Seconds())
	}
	if _, err := e.store.Pool.Exec(ctx, "ANALYZE kb_chunks"); err != nil {
		return err
	}

	kb, err = e.store.KB(ctx, e.user.ID, kb.ID)
	if err != nil {
		return err
	}
	var full, vec, txt []time.Duration
	for i := 0; i < queries; i++ {
		q := vocab.sentence(4)
		t0 := time.Now()
		if _, err := e.svc.Search(ctx, rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: q}); err != nil {
			return err
		}
		full = append(full, time.Since(t0))
		v := fakeollama.Vector(q, dims)
		t1 := time.Now()
		if _, err := e.store.VectorSearch(ctx, e.user.ID, kb, v, 24); err != nil {
			return err
		}
		vec = append(vec, time.Since(t1))
		t2 := time.Now()
		if _, err := e.store.TextSearch(ctx, e.user.ID, kb, db.TextQuery{Text: q, Idents: rag.Identifiers(q)}, 24); err != nil {
			return err
		}
		txt = append(txt, time.Since(t2))
	}
	fmt.Fprintf(w, "\nretrieval over %d chunks, %d queries one at a time:\n", stored, queries)
	report(w, "hybrid search (embed the question + both queries + fusion)", full)
	report(w, "vector query alone (HNSW, iterative scan)", vec)
	report(w, "full-text query alone (GIN)", txt)
	return nil
}

func report(w io.Writer, what string, ds []time.Duration) {
	slices.Sort(ds)
	p := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000 }
	fmt.Fprintf(w, "  %-62s p50 %7.2f ms  p95 %7.2f ms  max %7.2f ms\n", what, p(0.5), p(0.95), p(1))
}
