package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"
	"golang.org/x/sync/errgroup"

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

// benchOptions are the ingestion levers -mode bench compares.
type benchOptions struct {
	// bulk drops the vector index before loading and builds it after.
	bulk bool
	// writers is how many documents are stored at once (the job queue's
	// workers, rag.Config.Workers, default 2, each ingesting one).
	writers int
	// indexWith replaces the vector index's build parameters (the
	// default: Weft's, db.VectorIndexWith); oldIndex builds the index
	// before issue 14 instead (vector(N), pgvector's defaults), for which
	// only ingestion and recall are measured (the product's query does not
	// use it).
	indexWith string
	oldIndex  bool
	// recallQueries: query vectors whose index top 10 is compared with the
	// exact one.
	recallQueries int
}

// benchmark measures ingestion without the model's embedding time (the
// vectors are computed before the clock starts), the vector index's recall
// and retrieval latency over a knowledge base of n chunks.
func benchmark(ctx context.Context, w io.Writer, e *env, model string, n, queries int, o benchOptions) error {
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
	index, ddl := db.VectorIndexName(dims), db.VectorIndexDDL(dims)
	if o.oldIndex {
		index = fmt.Sprintf("kb_chunks_hnsw_%d", dims)
		ddl = fmt.Sprintf("CREATE INDEX %[1]s ON kb_chunks USING hnsw ((embedding::vector(%[2]d)) vector_cosine_ops) WHERE dims = %[2]d", index, dims)
	} else if o.indexWith != "" {
		ddl = strings.Replace(ddl, "WITH ("+db.VectorIndexWith+")", "WITH ("+o.indexWith+")", 1)
	}
	if _, err := e.store.Pool.Exec(ctx, "DROP INDEX "+db.VectorIndexName(dims)); err != nil {
		return err
	}
	if !o.bulk {
		if _, err := e.store.Pool.Exec(ctx, ddl); err != nil {
			return err
		}
	}
	const perDoc = 500
	fmt.Fprintf(w, "Knowledge base benchmark — %s\n", time.Now().UTC().Format(time.RFC3339))
	how := "HNSW index maintained while inserting"
	if o.bulk {
		how = "HNSW index built after loading"
	}
	fmt.Fprintf(w, "%d chunks of about 300 characters (words from a Zipf distribution over 50,000), %d per document, %d-dimension vectors (%s), %s, %d document(s) stored at once; 4-word questions\n",
		n, perDoc, dims, model, how, o.writers)
	fmt.Fprintf(w, "vector index: %s\n\n", strings.Join(strings.Fields(ddl), " "))

	type job struct {
		d    int
		data []byte
		rows []db.NewChunk
	}
	jobs := make(chan job, o.writers)
	var mu sync.Mutex
	var readSplit, store time.Duration
	stored := 0
	g, gctx := errgroup.WithContext(ctx)
	t00 := time.Now()
	g.Go(func() error {
		defer close(jobs)
		queued := 0
		for d := 0; queued < n; d++ {
			var md strings.Builder
			fmt.Fprintf(&md, "# Document %d\n\n", d)
			for s := 0; s < perDoc && queued+s < n; s++ {
				fmt.Fprintf(&md, "## Section %d\n\n%s %s\n\n", s, vocab.sentence(20), vocab.sentence(20))
			}
			data := []byte(md.String())
			t0 := time.Now()
			blocks, err := extract.ReadInProcess(gctx, rag.FormatMarkdown, data, extract.Limits{}) // the repository's own corpus: trusted
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
			queued += len(rows)
			select {
			case jobs <- job{d, data, rows}:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range o.writers {
		g.Go(func() error {
			for j := range jobs {
				doc, err := e.store.AddDocument(gctx, e.user.ID, kb.ID, db.NewDocument{Name: fmt.Sprintf("doc%d.md", j.d), SHA256: fmt.Sprint("bench", j.d), Data: j.data},
					func(pgx.Tx, db.Document) error { return nil })
				if err != nil {
					return err
				}
				t1 := time.Now()
				for i := 0; i < len(j.rows); i += 256 {
					if err := e.store.StoreChunks(gctx, doc, kb.Generation, dims, j.rows[i:min(i+256, len(j.rows))], 1); err != nil {
						return err
					}
				}
				// As the ingestion job does: the document is ready and its
				// words join the knowledge base's counts.
				if err := e.store.FinishIngest(gctx, doc.ID, ""); err != nil {
					return err
				}
				mu.Lock()
				store += time.Since(t1)
				before := stored
				stored += len(j.rows)
				if stored/10_000 != before/10_000 {
					fmt.Fprintf(w, "  … %d chunks stored, %.0f s\n", stored, time.Since(t00).Seconds())
				}
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	wall := time.Since(t00)
	fmt.Fprintf(w, "ingest (excluding embedding): read+chunk %.0f chunks/s, store (COPY + indexes) %.0f chunks/s over all writers, together (wall clock) %.0f chunks/s\n",
		float64(stored)/readSplit.Seconds(), float64(stored)/store.Seconds()*float64(o.writers), float64(stored)/wall.Seconds())
	if o.bulk {
		t0 := time.Now()
		conn, err := e.store.Pool.Acquire(ctx)
		if err != nil {
			return err
		}
		for _, q := range []string{"SET maintenance_work_mem = '2GB'", "SET max_parallel_maintenance_workers = 1", ddl} {
			if _, err := conn.Exec(ctx, q); err != nil {
				conn.Release()
				return err
			}
		}
		conn.Release()
		fmt.Fprintf(w, "HNSW index built after loading (bulk mode, so the store rate above excludes it): %.0f s\n", time.Since(t0).Seconds())
	}
	if _, err := e.store.Pool.Exec(ctx, "ANALYZE kb_chunks, kb_documents"); err != nil {
		return err
	}

	kb, err = e.store.KB(ctx, e.user.ID, kb.ID)
	if err != nil {
		return err
	}
	if !o.oldIndex {
		// Numbers of a query that does not use the index would say nothing
		// about it.
		if err := usesIndex(ctx, e, kb, index); err != nil {
			return err
		}
	}
	if o.recallQueries > 0 {
		// Questions like the timed ones below, and queries like a chunk's
		// own text (a 20-word sentence of the same vocabulary): HNSW finds
		// the neighbours of a query that looks like the indexed vectors
		// more easily than those of a short question far from all of them.
		if err := measureRecall(ctx, w, e, kb, "4-word questions", func() string { return vocab.sentence(4) }, o.recallQueries, o.oldIndex); err != nil {
			return err
		}
		if err := measureRecall(ctx, w, e, kb, "20-word sentences", func() string { return vocab.sentence(20) }, o.recallQueries, o.oldIndex); err != nil {
			return err
		}
	}
	if o.oldIndex {
		return nil // the product's query does not use this index
	}
	var full, vec, txt, pos []time.Duration
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
		// The passage query of that search (rag's passage scoring): the
		// positions of the question's words in the fused 60 best.
		res, err := e.svc.Search(ctx, rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: q, TopK: 60, All: true})
		if err != nil {
			return err
		}
		ids := make([]int64, 0, 60)
		for _, r := range res[:min(60, len(res))] {
			ids = append(ids, r.ChunkID)
		}
		t3 := time.Now()
		if _, err := e.store.TermPositions(ctx, e.user.ID, kb, db.TextQuery{Text: q, Idents: rag.Identifiers(q)}, ids); err != nil {
			return err
		}
		pos = append(pos, time.Since(t3))
	}
	fmt.Fprintf(w, "\nretrieval over %d chunks, %d queries one at a time:\n", stored, queries)
	report(w, "hybrid search (embed the question + both queries + fusion)", full)
	report(w, "vector query alone (HNSW, iterative scan)", vec)
	report(w, "full-text query alone (GIN)", txt)
	report(w, "passage query alone (word positions in the fused 60)", pos)
	return nil
}

func report(w io.Writer, what string, ds []time.Duration) {
	slices.Sort(ds)
	p := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000 }
	fmt.Fprintf(w, "  %-62s p50 %7.2f ms  p95 %7.2f ms  max %7.2f ms\n", what, p(0.5), p(0.95), p(1))
}

// measureRecall compares, for q random queries, the vector index's top 10
// with the exact top 10 (a sequential scan in full precision): recall@10,
// for VectorSearch at the limit Weft's retrieval asks for (60 candidates)
// and for its query at other ef_search. A result as near as the exact 10th
// counts as found (ties); the share of the very ids is reported beside it.
func measureRecall(ctx context.Context, w io.Writer, e *env, kb db.KnowledgeBase, what string, query func() string, q int, oldIndex bool) error {
	const k = 10
	// What VectorSearch does at the limit Weft's retrieval asks for (60
	// candidates), then that query with other ef_search (120: what it set
	// before issue 14).
	type setting struct{ limit, ef int }
	settings := []setting{{60, 0}, {60, 120}, {60, 200}, {60, 800}, {60, 1000}}
	found, same := make([]int, len(settings)), make([]int, len(settings))
	took := make([][]time.Duration, len(settings))
	var exactTime time.Duration
	distances := fmt.Sprintf(`SELECT id, embedding::vector(%[1]d) <=> $1::vector(%[1]d) FROM kb_chunks WHERE id = ANY($2)`, kb.Dims)
	for i := 0; i < q; i++ {
		v := pgvector.NewVector(fakeollama.Vector(query(), kb.Dims))
		t0 := time.Now()
		want := map[int64]bool{}
		var tenth float64
		err := e.store.InTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL enable_indexscan = off"); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, fmt.Sprintf(`SELECT id, embedding::vector(%[1]d) <=> $1::vector(%[1]d) AS d FROM kb_chunks
				WHERE dims = %[1]d AND kb_id = $2 ORDER BY d LIMIT %[2]d`, kb.Dims, k), v, kb.ID)
			if err != nil {
				return err
			}
			var id int64
			_, err = pgx.ForEachRow(rows, []any{&id, &tenth}, func() error {
				want[id] = true
				return nil
			})
			return err
		})
		if err != nil {
			return err
		}
		exactTime += time.Since(t0)
		for j, st := range settings {
			t1 := time.Now()
			got, err := indexTop(ctx, e, kb, v.Slice(), st.limit, st.ef, oldIndex)
			if err != nil {
				return err
			}
			took[j] = append(took[j], time.Since(t1))
			got = got[:min(k, len(got))]
			rows, err := e.store.Pool.Query(ctx, distances, v, got)
			if err != nil {
				return err
			}
			var id int64
			var d float64
			if _, err := pgx.ForEachRow(rows, []any{&id, &d}, func() error {
				if d <= tenth+1e-9 {
					found[j]++
				}
				if want[id] {
					same[j]++
				}
				return nil
			}); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(w, "\nrecall@10 of the vector index, %d %s (exact top 10 by a sequential scan in full precision, %.0f ms each):\n", q, what, exactTime.Seconds()*1000/float64(q))
	for j, st := range settings {
		what := fmt.Sprintf("VectorSearch, limit %d (its ef_search: %d)", st.limit, db.EfSearch(st.limit))
		if st.ef > 0 {
			what = fmt.Sprintf("the same query, limit %d, ef_search %d", st.limit, st.ef)
		}
		slices.Sort(took[j])
		fmt.Fprintf(w, "  %-52s recall@10 %.3f (the same ids: %.3f), query p50 %.2f ms, p95 %.2f ms\n", what, float64(found[j])/float64(q*k), float64(same[j])/float64(q*k),
			ms(took[j][len(took[j])/2]), ms(took[j][len(took[j])*95/100]))
	}
	return nil
}

// indexTop is the vector query's result ids: the product's (VectorSearch;
// with ef > 0 its query at that ef_search), or for the index before issue 14
// the same query over vector(N).
func indexTop(ctx context.Context, e *env, kb db.KnowledgeBase, v []float32, limit, ef int, oldIndex bool) ([]int64, error) {
	if !oldIndex && ef == 0 {
		hits, err := e.store.VectorSearch(ctx, e.user.ID, kb, v, limit)
		ids := make([]int64, len(hits))
		for i, h := range hits {
			ids[i] = h.ChunkID
		}
		return ids, err
	}
	if ef == 0 {
		ef = max(40, 2*limit) // what VectorSearch set before issue 14
	}
	query := db.VectorSearchSQL(kb.Dims)
	if oldIndex {
		query = fmt.Sprintf(`SELECT c.id FROM kb_chunks c JOIN kb_documents d ON d.id = c.document_id
			WHERE c.dims = %[1]d AND c.kb_id = $2 AND c.owner_id = $3 AND c.generation = $4 AND d.status = 'ready'
			ORDER BY c.embedding::vector(%[1]d) <=> $1::vector(%[1]d) LIMIT $5`, kb.Dims)
	}
	var ids []int64
	err := e.store.InTx(ctx, func(tx pgx.Tx) error {
		for _, set := range []string{"SET LOCAL hnsw.iterative_scan = strict_order", "SET LOCAL plan_cache_mode = force_custom_plan",
			fmt.Sprintf("SET LOCAL hnsw.ef_search = %d", ef)} {
			if _, err := tx.Exec(ctx, set); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, query, pgvector.NewVector(v), kb.ID, e.user.ID, kb.Generation, limit)
		if err != nil {
			return err
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				return err
			}
			ids = append(ids, vals[0].(int64))
		}
		return rows.Err()
	})
	return ids, err
}

// usesIndex fails unless the product's vector query (as VectorSearch runs
// it) is an index scan of index.
func usesIndex(ctx context.Context, e *env, kb db.KnowledgeBase, index string) error {
	return e.store.InTx(ctx, func(tx pgx.Tx) error {
		for _, set := range []string{"SET LOCAL hnsw.iterative_scan = strict_order", "SET LOCAL plan_cache_mode = force_custom_plan"} {
			if _, err := tx.Exec(ctx, set); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, "EXPLAIN "+db.VectorSearchSQL(kb.Dims), pgvector.NewVector(fakeollama.Vector("a question", kb.Dims)),
			kb.ID, e.user.ID, kb.Generation, 60)
		if err != nil {
			return err
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if joined := strings.Join(plan, "\n"); !strings.Contains(joined, "Index Scan using "+index) {
			return fmt.Errorf("the vector query does not use %s:\n%s", index, joined)
		}
		return nil
	})
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
