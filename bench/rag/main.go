// Command rag measures knowledge bases: retrieval quality on the evaluation
// set in rag/testdata/eval and on the second set, rag/testdata/eval-python,
// asked over Debian's python3.11-doc pages (-mode eval, `make eval-rag`),
// the rules of that second set (-mode check-eval), textbook baselines on
// that set to read its numbers against (-mode baseline), and ingestion
// throughput and retrieval latency at scale (-mode bench, part of
// `make bench`).
//
// It starts a throwaway PostgreSQL cluster (or uses -database-url) and, by
// default, the in-repo fake Ollama, whose embeddings are a deterministic
// lexical model (hashed words and trigrams). With -ollama and -embed-model it
// uses a real Ollama server instead, for numbers with a real embedding model.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"weft/chat"
	"weft/db"
	"weft/extract"
	"weft/internal/app"
	"weft/internal/fakeollama"
	"weft/rag"
)

func main() {
	// Ingestion and the check read documents in the jail, whose child is
	// this binary re-executed.
	extract.ChildMain()
	mode := flag.String("mode", "eval", "eval (retrieval quality), check-eval (the rules of the second set), baseline (textbook BM25 and trigram baselines on the second set) or bench (ingestion and latency)")
	dbURL := flag.String("database-url", "", "use this database instead of a throwaway cluster")
	ollama := flag.String("ollama", "", "a real Ollama server (default: the in-repo fake)")
	model := flag.String("embed-model", "embedder", "embedding model")
	corpus := flag.String("corpus", "rag/testdata/eval", "evaluation set (corpus/ and questions.json)")
	chunks := flag.Int("chunks", 100_000, "bench: chunks in the knowledge base")
	queries := flag.Int("queries", 200, "bench: retrieval queries timed")
	bulk := flag.Bool("bulk", false, "bench: build the HNSW index after loading instead of maintaining it (for -chunks 1000000)")
	writers := flag.Int("writers", 1, "bench: documents stored at once (the job queue runs 2 ingestion jobs by default)")
	indexWith := flag.String("index-with", "", "bench: the vector index's build parameters instead of Weft's (e.g. \"m = 16, ef_construction = 64\")")
	oldIndex := flag.Bool("old-index", false, "bench: the vector index before issue 14 (vector, pgvector's defaults); ingestion and recall only")
	recall := flag.Int("recall", 100, "bench: questions the vector index's recall@10 is measured with (0: none)")
	out := flag.String("out", "", "also write the report here")
	weights := flag.String("weights", "1,0.5,0.3,0.15", "eval: vector weights of the hybrid variants (comma-separated)")
	pyset := flag.String("pyset", "rag/testdata/eval-python", "eval, check-eval: the second set (questions.json, pages.txt)")
	pyroot := flag.String("pyroot", "/usr/share/doc/python3.11/html", "eval, check-eval: the second set's corpus (Debian's python3.11-doc); eval skips the set when absent")
	rewrite := flag.Bool("rewrite", false, "eval: also ask every mode with query rewriting (one more row per mode)")
	devOnly := flag.Bool("dev", false, "eval: ask only the dev part of the second set (to tune without seeing the held-out part)")
	chatModel := flag.String("chat-model", "tiny", "eval -rewrite: the chat model that rewrites questions")
	flag.Parse()
	if *mode == "check-eval" {
		if err := checkEval(context.Background(), os.Stdout, *pyset, *pyroot, 100); err != nil {
			fail(err)
		}
		return
	}

	var w io.Writer = os.Stdout
	if *out != "" {
		if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
			fail(err)
		}
		f, err := os.Create(*out)
		if err != nil {
			fail(err)
		}
		defer f.Close()
		w = io.MultiWriter(os.Stdout, f)
	}
	ctx := context.Background()
	e, cleanup, err := setup(ctx, *dbURL, *ollama)
	if err != nil {
		fail(err)
	}
	defer cleanup()
	if *rewrite {
		e.rw.model = *chatModel
	}
	switch *mode {
	case "eval":
		err = evaluateBoth(ctx, w, e, *model, *corpus, *weights, *pyset, *pyroot, *devOnly)
	case "baseline":
		err = baseline(ctx, w, e, *pyset, *pyroot)
	case "bench":
		err = benchmark(ctx, w, e, *model, *chunks, *queries,
			benchOptions{bulk: *bulk, writers: max(1, *writers), indexWith: *indexWith, oldIndex: *oldIndex, recallQueries: *recall})
	default:
		err = fmt.Errorf("unknown -mode %q", *mode)
	}
	if err != nil {
		cleanup()
		fail(err)
	}
}

// evaluateBoth runs the first set (its hybrid variants at the weights, a
// comma-separated list) and then, when its corpus is installed, the second.
func evaluateBoth(ctx context.Context, w io.Writer, e *env, model, corpus, weights, pyset, pyroot string, devOnly bool) error {
	var ws []float64
	for _, f := range strings.Split(weights, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			return fmt.Errorf("-weights: %q is not a positive number", f)
		}
		ws = append(ws, v)
	}
	if err := evaluate(ctx, w, e, corpus, model, ws); err != nil {
		return err
	}
	if _, err := os.Stat(pyroot); err != nil {
		fmt.Fprintf(w, "\nSecond set skipped: %s is absent (make deps-eval installs python3.11-doc)\n", pyroot)
		return nil
	}
	return evaluatePython(ctx, w, e, pyset, pyroot, model, devOnly)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "rag:", err)
	os.Exit(1)
}

// env is a migrated database, a rag service and a user with a workspace.
type env struct {
	store *db.DB
	svc   *rag.Service
	user  db.User
	ws    db.Workspace
	host  string
	rw    rewriting
}

func setup(ctx context.Context, dbURL, ollama string) (*env, func(), error) {
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		cleanups = nil
	}
	dir, err := os.MkdirTemp("", "weft-rag-")
	if err != nil {
		return nil, cleanup, err
	}
	cleanups = append(cleanups, func() { os.RemoveAll(dir) })
	if dbURL == "" {
		pg, err := db.StartEmbedded(ctx, filepath.Join(dir, "postgres"))
		if err != nil {
			return nil, cleanup, err
		}
		cleanups = append(cleanups, func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = pg.Stop(sctx)
		})
		dbURL = pg.URL
	}
	store, err := db.Open(ctx, dbURL)
	if err != nil {
		return nil, cleanup, err
	}
	cleanups = append(cleanups, store.Close)
	if _, err := store.Migrate(ctx); err != nil {
		return nil, cleanup, err
	}
	if ollama == "" {
		fake := fakeollama.Start()
		cleanups = append(cleanups, fake.Close)
		ollama = fake.URL
	}
	u, err := url.Parse(ollama)
	if err != nil {
		return nil, cleanup, err
	}
	// Weft as the weft command builds it: ingestion runs on the same job
	// queue, beside the other parts' queues, as it does in production.
	a, err := app.New(store, app.Config{Ollama: []*url.URL{u}, DataDir: dir, Chat: chat.Config{Instance: "bench-rag"},
		RAG: rag.Config{Workers: 2, EmbedConcurrency: 2}})
	if err != nil {
		return nil, cleanup, err
	}
	cleanups = append(cleanups, a.Close)
	if err := a.Start(ctx); err != nil {
		return nil, cleanup, err
	}
	cleanups = append(cleanups, func() { a.Shutdown(context.Background(), 10*time.Second) })
	user, ws, err := store.CreateUser(ctx, fmt.Sprintf("bench-%d@example.com", time.Now().UnixNano()), "", "x")
	if err != nil {
		return nil, cleanup, err
	}
	return &env{store: store, svc: a.RAG, user: user, ws: ws, host: ollama}, cleanup, nil
}
