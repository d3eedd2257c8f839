package rag_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"weft/chat"
	"weft/db"
	"weft/extract"
	"weft/internal/fakeollama"
	"weft/internal/hostile"
	"weft/internal/jobs"
	"weft/internal/testenv"
	"weft/internal/testwait"
	"weft/rag"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is a rag service over a fresh database and a fake Ollama.
type env struct {
	t     *testing.T
	store *db.DB
	fake  *fakeollama.Server
	svc   *rag.Service
	user  db.User
	ws    db.Workspace
}

func newEnv(t *testing.T, cfg rag.Config, opts ...fakeollama.Option) *env {
	t.Helper()
	store := testenv.NewDB(t)
	return newEnvOn(t, store, newQueue(t, store, map[string]int{rag.Queue: cfg.Workers}), cfg, opts...)
}

// newQueue is a job queue over store with the given queues; newEnvOn
// starts it once the service has registered its workers.
func newQueue(t *testing.T, store *db.DB, queues map[string]int) *jobs.Queue {
	t.Helper()
	q, err := jobs.New(store.Pool, jobs.Config{Queues: queues})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// newEnvOn is newEnv over a given database and job queue.
func newEnvOn(t *testing.T, store *db.DB, q *jobs.Queue, cfg rag.Config, opts ...fakeollama.Option) *env {
	t.Helper()
	fake := fakeollama.New(t, opts...)
	u, _ := url.Parse(fake.URL)
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = 10 * time.Millisecond
	}
	cfg.OllamaHost = fake.URL
	svc, err := rag.New(store, chat.NewOllamaClient(u), q, cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartJobs(t, q)
	e := &env{t: t, store: store, fake: fake, svc: svc}
	e.user, e.ws = e.newUser("rag@example.com")
	return e
}

func (e *env) newUser(email string) (db.User, db.Workspace) {
	e.t.Helper()
	u, ws, err := e.store.CreateUser(context.Background(), email, "", "x")
	if err != nil {
		e.t.Fatal(err)
	}
	return u, ws
}

func (e *env) kb(user db.User, ws db.Workspace, name, model string) db.KnowledgeBase {
	e.t.Helper()
	dims, err := e.svc.Dimensions(context.Background(), model)
	if err != nil {
		e.t.Fatal(err)
	}
	kb, err := e.store.CreateKB(context.Background(), user.ID, ws.ID, db.KBInput{Name: name, EmbedModel: model, Dims: dims})
	if err != nil {
		e.t.Fatal(err)
	}
	return kb
}

func (e *env) add(user db.User, kb db.KnowledgeBase, name, content string) db.Document {
	e.t.Helper()
	sum := sha256.Sum256([]byte(content))
	doc, err := e.store.AddDocument(context.Background(), user.ID, kb.ID,
		db.NewDocument{Name: name, SHA256: hex.EncodeToString(sum[:]), Data: []byte(content)}, e.svc.EnqueueIngest(context.Background()))
	if err != nil {
		e.t.Fatal(err)
	}
	return doc
}

func (e *env) wait(user db.User, doc db.Document) db.Document {
	e.t.Helper()
	var d db.Document
	if !testwait.Until(90*time.Second, func() bool {
		var err error
		if d, err = e.store.Document(context.Background(), user.ID, doc.ID); err != nil {
			e.t.Fatal(err)
		}
		return d.Status == db.DocReady || d.Status == db.DocFailed
	}) {
		e.t.Fatalf("document %d still %s (%.0f%%)", d.ID, d.Status, d.Progress*100)
	}
	return d
}

// sections is a Markdown document with n sections about distinct things.
func sections(n int, topic string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s handbook\n\n", topic)
	for i := range n {
		fmt.Fprintf(&b, "## Part %d\n\nSection %d of the %s handbook explains item%d thoroughly, with details about widget%d and gadget%d.\n\n", i, i, topic, i, i, i)
	}
	return b.String()
}

func TestIngestionChunksEmbedsInBoundedBatchesAndRetrievalFindsThePassage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{EmbedBatch: 8, EmbedConcurrency: 2, Workers: 4}, fakeollama.WithEmbedDelay(5*time.Millisecond))
	kb := e.kb(e.user, e.ws, "Manuals", "embedder")
	mustExec(t, e.store, "UPDATE knowledge_bases SET chunk_size = 200, chunk_overlap = 0 WHERE id = $1", kb.ID)
	var docs []db.Document
	for _, topic := range []string{"boat", "kite", "oven", "piano"} {
		docs = append(docs, e.add(e.user, kb, topic+".md", sections(30, topic)))
	}
	for _, d := range docs {
		if d = e.wait(e.user, d); d.Status != db.DocReady || d.Chunks < 30 || d.Progress != 1 {
			t.Fatalf("document %s: %s, %d chunks, progress %v, error %q", d.Name, d.Status, d.Chunks, d.Progress, d.Error)
		}
	}
	for _, r := range e.fake.EmbedRequests() {
		if r.Inputs > 8 {
			t.Errorf("an embedding request carried %d texts, the batch is 8", r.Inputs)
		}
	}
	if got := e.fake.MaxConcurrentEmbeds(); got > 2 {
		t.Errorf("%d embedding requests at once, the bound is 2", got)
	}

	kb, _ = e.store.KB(context.Background(), e.user.ID, kb.ID)
	res, err := e.svc.Search(context.Background(), rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: "what does the oven handbook say about widget17?"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 0 || !strings.Contains(res[0].Text, "widget17") || res[0].Document != "oven.md" {
		t.Fatalf("top result = %+v", res)
	}
	if res[0].VectorRank == 0 || res[0].TextRank == 0 || res[0].Fused <= 0 || res[0].N != 1 {
		t.Errorf("the top result does not say how it ranked: %+v", res[0].Source)
	}
	if got := res[0].Headings; len(got) != 2 || got[1] != "Part 17" {
		t.Errorf("headings = %q, want the heading path", got)
	}
}

func TestRetrievalNeverReturnsAnotherUsersChunks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	mine := e.kb(e.user, e.ws, "Mine", "embedder")
	e.wait(e.user, e.add(e.user, mine, "mine.md", "# Mine\n\nThe secret launch code is alpha-bravo-seven."))
	stranger, sws := e.newUser("stranger@example.com")
	theirs := e.kb(stranger, sws, "Theirs", "embedder")
	e.wait(stranger, e.add(stranger, theirs, "theirs.md", "# Theirs\n\nNothing about launch codes here, only gardening."))

	// The stranger asks with my knowledge base (ids guessed): nothing.
	res, err := e.svc.Search(context.Background(), rag.Query{User: stranger.ID, KBs: []db.KnowledgeBase{mine, theirs}, Text: "secret launch code", All: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.KBID == mine.ID || strings.Contains(r.Text, "alpha-bravo") {
			t.Errorf("another user's chunk was retrieved: %+v", r.Source)
		}
	}
	if len(res) == 0 {
		t.Errorf("the stranger's own knowledge base found nothing (the test would pass vacuously)")
	}
}

func TestTheVectorQueryUsesTheHNSWIndexAndFiltersDoNotStarveIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	ctx := context.Background()
	small := e.kb(e.user, e.ws, "Small", "embedder-small")
	big := e.kb(e.user, e.ws, "Big", "embedder")
	// Many chunks of the big knowledge base, a few of the small one, same
	// dimension table: the filter on the small one must still fill top-k.
	other := e.kb(e.user, e.ws, "Other small", "embedder-small")
	insertChunks(t, e.store, e.user, other, 3000)
	insertChunks(t, e.store, e.user, small, 12)
	insertChunks(t, e.store, e.user, big, 50)
	mustExec(t, e.store, "ANALYZE kb_chunks, kb_documents")

	q := fakeollama.Vector("chunk number 5", small.Dims)
	hits, err := e.store.VectorSearch(ctx, e.user.ID, small, q, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 10 {
		t.Errorf("%d hits, want 10: the filter starved the index scan", len(hits))
	}
	for _, h := range hits {
		if h.KBID != small.ID {
			t.Errorf("a chunk of knowledge base %d came back", h.KBID)
		}
	}
	// EXPLAIN the very query VectorSearch runs, on a knowledge base big
	// enough for an index to matter. (For one of a few dozen chunks the
	// planner rightly reads them exactly through kb_chunks_kb_idx.)
	q = fakeollama.Vector("chunk number 5", other.Dims)
	tx, err := e.store.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	mustExecTx(t, tx, "SET LOCAL hnsw.iterative_scan = strict_order")
	rows, err := tx.Query(ctx, "EXPLAIN "+db.VectorSearchSQL(other.Dims), pgvectorArg(q), other.ID, e.user.ID, other.Generation, 10)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if joined := strings.Join(plan, "\n"); !strings.Contains(joined, "Index Scan using "+db.VectorIndexName(other.Dims)) {
		t.Errorf("the vector query does not use the HNSW index:\n%s", joined)
	}
}

func TestChangingTheEmbeddingModelReembedsAndSwapsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{EmbedBatch: 4})
	ctx := context.Background()
	kb := e.kb(e.user, e.ws, "Moving", "embedder")
	d := e.wait(e.user, e.add(e.user, kb, "doc.md", sections(12, "garden")))
	if d.Status != db.DocReady {
		t.Fatalf("%s: %s", d.Status, d.Error)
	}
	if err := e.store.StartReembed(ctx, e.user.ID, kb.ID, "embedder-small", 64, e.svc.EnqueueReembed(ctx)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the move to embedder-small", 30*time.Second, func() bool {
		kb, _ = e.store.KB(ctx, e.user.ID, kb.ID)
		if kb.PendingModel == "" {
			return true
		}
		// Until the swap, every retrieval uses one complete generation.
		res, err := e.svc.Search(ctx, rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: "widget3", All: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) == 0 {
			t.Fatalf("retrieval found nothing during the move")
		}
		return false
	})
	if kb.EmbedModel != "embedder-small" || kb.Dims != 64 || kb.Generation != 2 || kb.PendingError != "" {
		t.Fatalf("after the move: %+v", kb)
	}
	var gens []int
	rows, _ := e.store.Pool.Query(ctx, "SELECT DISTINCT generation FROM kb_chunks WHERE kb_id = $1", kb.ID)
	gens, _ = pgx.CollectRows(rows, pgx.RowTo[int])
	if len(gens) != 1 || gens[0] != 2 {
		t.Errorf("generations left: %v, want only 2", gens)
	}
	res, err := e.svc.Search(ctx, rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: "widget3 garden"})
	if err != nil || len(res) == 0 || !strings.Contains(res[0].Text, "widget3") {
		t.Errorf("after the move the passage is not found: %v %+v", err, res)
	}
}

func TestTransientEmbeddingErrorsAreRetriedAndAMissingModelFailsClearly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	kb := e.kb(e.user, e.ws, "Flaky", "embedder")
	e.fake.FailEmbeds(3, 503)
	if d := e.wait(e.user, e.add(e.user, kb, "a.md", "# A\n\nSome text about rivers.")); d.Status != db.DocReady {
		t.Errorf("after 3 transient failures: %s %q", d.Status, d.Error)
	}
	mustExec(t, e.store, "UPDATE knowledge_bases SET embed_model = 'gone' WHERE id = $1", kb.ID)
	d := e.wait(e.user, e.add(e.user, kb, "b.md", "# B\n\nOther text about lakes."))
	if d.Status != db.DocFailed || !strings.Contains(d.Error, "ollama pull gone") {
		t.Errorf("missing model: %s %q", d.Status, d.Error)
	}
}

func TestIngestionResumesAfterTheChunksAlreadyStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{EmbedBatch: 5})
	ctx := context.Background()
	kb := e.kb(e.user, e.ws, "Resume", "embedder")
	mustExec(t, e.store, "UPDATE knowledge_bases SET chunk_size = 200, chunk_overlap = 0 WHERE id = $1", kb.ID)
	content := sections(20, "lamp")
	blocks, err := extract.ReadInProcess(ctx, rag.FormatMarkdown, []byte(content), extract.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	chunks := rag.Split(blocks, rag.ChunkOptions{Size: 200, Overlap: 0})
	// A previous attempt stored the first 10 chunks, then its instance died.
	sum := sha256.Sum256([]byte(content))
	doc, err := e.store.AddDocument(ctx, e.user.ID, kb.ID, db.NewDocument{Name: "lamp.md", SHA256: hex.EncodeToString(sum[:]), Data: []byte(content)},
		func(pgx.Tx, db.Document) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var first []db.NewChunk
	for _, c := range chunks[:10] {
		first = append(first, db.NewChunk{Position: c.Position, Text: c.Text, Headings: c.Headings, Page: c.Page,
			Embedding: fakeollama.Vector(rag.EmbedText("", c.Headings, c.Text), kb.Dims)})
	}
	if err := e.store.StoreChunks(ctx, doc, kb.Generation, kb.Dims, first, 0.5); err != nil {
		t.Fatal(err)
	}
	before := len(e.fake.EmbedRequests())
	if err := e.store.RequeueDocument(ctx, e.user.ID, doc.ID, e.svc.EnqueueIngest(ctx)); err == nil {
		t.Fatalf("a document that did not fail was requeued")
	}
	mustExec(t, e.store, "UPDATE kb_documents SET status = 'failed' WHERE id = $1", doc.ID)
	if err := e.store.RequeueDocument(ctx, e.user.ID, doc.ID, e.svc.EnqueueIngest(ctx)); err != nil {
		t.Fatal(err)
	}
	d := e.wait(e.user, doc)
	if d.Status != db.DocReady || d.Chunks != len(chunks) {
		t.Fatalf("%s with %d chunks, want ready with %d", d.Status, d.Chunks, len(chunks))
	}
	embedded := 0
	for _, r := range e.fake.EmbedRequests()[before:] {
		embedded += r.Inputs
	}
	if embedded != len(chunks)-10 {
		t.Errorf("%d chunks embedded again, want only the %d missing", embedded, len(chunks)-10)
	}
}

func mustExec(t *testing.T, store *db.DB, sql string, args ...any) {
	t.Helper()
	if _, err := store.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func mustExecTx(t *testing.T, tx pgx.Tx, sql string) {
	t.Helper()
	if _, err := tx.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// insertChunks adds n chunks with the fake's vectors to a knowledge base.
func insertChunks(t *testing.T, store *db.DB, user db.User, kb db.KnowledgeBase, n int) db.Document {
	t.Helper()
	ctx := context.Background()
	doc, err := store.AddDocument(ctx, user.ID, kb.ID, db.NewDocument{Name: kb.Name + ".txt", SHA256: fmt.Sprint(kb.ID, "-", n), Data: []byte("x")},
		func(pgx.Tx, db.Document) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var cs []db.NewChunk
	for i := range n {
		text := fmt.Sprintf("chunk number %d of %s", i, kb.Name)
		cs = append(cs, db.NewChunk{Position: i, Text: text, Headings: []string{}, Embedding: fakeollama.Vector(text, kb.Dims)})
	}
	if err := store.StoreChunks(ctx, doc, kb.Generation, kb.Dims, cs, 1); err != nil {
		t.Fatal(err)
	}
	if err := store.FinishIngest(ctx, doc.ID, ""); err != nil {
		t.Fatal(err)
	}
	return doc
}

func pgvectorArg(v []float32) any { return pgvector.NewVector(v) }

// zipBomb is a DOCX whose document.xml expands to more than the reader
// accepts (100 MB) from a few hundred kilobytes.
func zipBomb(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range []string{"[Content_Types].xml", "_rels/.rels"} {
		w, _ := zw.Create(name)
		w.Write([]byte(`<?xml version="1.0"?><x/>`))
	}
	w, err := zw.Create("word/document.xml")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(`<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>`))
	zeros := make([]byte, 1<<20)
	for i := range zeros {
		zeros[i] = 'a'
	}
	for range 210 {
		w.Write(zeros)
	}
	w.Write([]byte(`</w:t></w:r></w:p></w:body></w:document>`))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestHostileFilesEndFailedWithAClearMessageAndBrokenEncodingsAreRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	kb := e.kb(e.user, e.ws, "Hostile", "embedder")
	cases := []struct {
		name, content string
		status        string
		errorHas      string
	}{
		{"bomb.docx", string(zipBomb(t)), db.DocFailed, "expands to more than"},
		{"broken.pdf", "%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage garbage\n%%EOF", db.DocFailed, "PDF"},
		{"latin1.txt", "Caf\xe9 au lait co\xfbte deux euros.\n\nNa\xefve r\xe9sum\xe9.", db.DocReady, ""},
		{"binary.txt", "\x7fELF\x02\x01\x01\x00\x00\x00\x00 binary \x00\x00", db.DocFailed, "Unsupported file type: Weft reads PDF"},
	}
	for _, tc := range cases {
		d := e.wait(e.user, e.add(e.user, kb, tc.name, tc.content))
		if d.Status != tc.status || !strings.Contains(d.Error, tc.errorHas) {
			t.Errorf("%s: %s %q, want %s with %q", tc.name, d.Status, d.Error, tc.status, tc.errorHas)
		}
		if strings.Contains(d.Error, "/") && strings.Contains(d.Error, ".go") {
			t.Errorf("%s: the error shows internals: %q", tc.name, d.Error)
		}
	}
	res, err := e.svc.Search(context.Background(), rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: "café au lait"})
	if err != nil || len(res) == 0 || !strings.Contains(res[0].Text, "Café au lait") {
		t.Errorf("Latin-1 text was not repaired into searchable text: %v %+v", err, res)
	}
}

func TestAnXrefBombFailsItsDocumentOnceWithAClearMessageAndIsNotRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	kb := e.kb(e.user, e.ws, "Bombs", "embedder")
	doc := e.add(e.user, kb, "bomb.pdf", string(hostile.XrefBomb()))
	d := e.wait(e.user, doc)
	if want := "This PDF could not be read: it needs more memory than Weft allows for one file."; d.Status != db.DocFailed || d.Error != want {
		t.Fatalf("document %s %q, want failed with %q", d.Status, d.Error, want)
	}
	ctx := context.Background()
	var state string
	var attempt int
	if !testwait.Until(30*time.Second, func() bool {
		err := e.store.Pool.QueryRow(ctx, "SELECT state, attempt FROM river_job WHERE kind = 'kb_ingest' AND (args->>'document_id')::bigint = $1", doc.ID).Scan(&state, &attempt)
		if err != nil {
			t.Fatal(err)
		}
		if state != "cancelled" && state != "running" {
			t.Fatalf("the job is %s after %d attempts, want cancelled after one", state, attempt)
		}
		return state == "cancelled"
	}) {
		t.Fatalf("the job is still %s after %d attempts, want cancelled after one", state, attempt)
	}
	if attempt != 1 {
		t.Errorf("the job ran %d times, want once", attempt)
	}
	// The server still ingests the next document.
	if d := e.wait(e.user, e.add(e.user, kb, "fine.md", "# Fine\n\nA document that reads.")); d.Status != db.DocReady {
		t.Errorf("the next document is %s %q", d.Status, d.Error)
	}
}
