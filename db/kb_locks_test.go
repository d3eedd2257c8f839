package db_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"weft/db"
	"weft/internal/testenv"
)

// lockKB is a knowledge base (dimension 3, english) with one ready
// document and one whose chunks are stored but which is not finished yet.
type lockKB struct {
	store      *db.DB
	user       int64
	kb         db.KnowledgeBase
	ready, mid db.Document
}

func newLockKB(t *testing.T) lockKB {
	t.Helper()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "locks@example.com")
	kb, err := store.CreateKB(ctx, u.ID, ws.ID, db.KBInput{Name: "Zoo", EmbedModel: "embedder", Dims: 3})
	if err != nil {
		t.Fatal(err)
	}
	k := lockKB{store: store, user: u.ID, kb: kb}
	k.ready = k.ingest(t, "feeding.md", []string{"Running the feeders daily.", "Brushes and running water."})
	if err := store.FinishIngest(ctx, k.ready.ID, ""); err != nil {
		t.Fatal(err)
	}
	k.mid = k.ingest(t, "grazing.md", []string{"Zebras graze while running.", "Grass for the zebras."})
	return k
}

// ingest adds a document and stores its chunks, leaving it processing.
func (k lockKB) ingest(t *testing.T, name string, texts []string) db.Document {
	t.Helper()
	ctx := context.Background()
	sum := sha256.Sum256([]byte(name))
	doc, err := k.store.AddDocument(ctx, k.user, k.kb.ID, db.NewDocument{Name: name, SHA256: hex.EncodeToString(sum[:]), Data: []byte(name)},
		func(pgx.Tx, db.Document) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	target, err := k.store.StartIngest(ctx, doc.ID)
	if err != nil {
		t.Fatal(err)
	}
	var chunks []db.NewChunk
	for i, text := range texts {
		chunks = append(chunks, db.NewChunk{Position: i, Text: text, Headings: []string{}, Title: name, Embedding: []float32{1, float32(i), 0}})
	}
	if err := k.store.StoreChunks(ctx, target.Doc, target.KB.Generation, 3, chunks, 1); err != nil {
		t.Fatal(err)
	}
	return target.Doc
}

// hold opens a transaction on its own connection that locks what sql
// selects FOR UPDATE; release commits it.
func (k lockKB) hold(t *testing.T, sql string, args ...any) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := k.store.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := tx.Exec(ctx, sql+" FOR UPDATE", args...)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("hold %s: %v (%d rows)", sql, err, tag.RowsAffected())
	}
	return func() {
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// op is a store call running on its own goroutine.
type op struct {
	name string
	done chan error
}

func run(name string, f func() error) *op {
	o := &op{name: name, done: make(chan error, 1)}
	go func() { o.done <- f() }()
	return o
}

func (o *op) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-o.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not finish", o.name)
		return nil
	}
}

// waitBlocked polls until n sessions of the test's database wait for a
// lock; none of ops may finish meanwhile.
func (k lockKB) waitBlocked(t *testing.T, n int, ops ...*op) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := k.store.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == n {
			return
		}
		for _, o := range ops {
			select {
			case err := <-o.done:
				t.Fatalf("%s finished (%v) before %d sessions waited for a lock (%d do)", o.name, err, n, waiting)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait for a lock, not %d", waiting, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func noDeadlock(t *testing.T, o *op) {
	t.Helper()
	err := o.wait(t)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
		t.Fatalf("%s: deadlock: %v", o.name, err)
	}
	if err != nil {
		t.Fatalf("%s: %v", o.name, err)
	}
}

// switchTo records the language the knowledge base moves to.
func (k lockKB) switchTo(t *testing.T, lang string) {
	t.Helper()
	if err := k.store.StartLanguage(context.Background(), k.user, k.kb.ID, lang, func(pgx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// checkConsistent: every chunk is indexed in lang, which the knowledge
// base searches, and its word and chunk counts are those of its ready
// documents' chunks counted again.
func (k lockKB) checkConsistent(t *testing.T, lang string) {
	t.Helper()
	ctx := context.Background()
	var chunks, other int
	if err := k.store.Pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE lang <> $2) FROM kb_chunks WHERE kb_id = $1",
		k.kb.ID, lang).Scan(&chunks, &other); err != nil {
		t.Fatal(err)
	}
	if chunks == 0 || other != 0 {
		t.Errorf("%d of %d chunks are not indexed in %s", other, chunks, lang)
	}
	kb, err := k.store.KB(ctx, k.user, k.kb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if kb.Language != lang || kb.PendingLanguage != "" {
		t.Errorf("language %q, pending %q", kb.Language, kb.PendingLanguage)
	}
	const recount = `SELECT l.lexeme AS word, count(*) AS chunks
		FROM kb_chunks c JOIN kb_documents d ON d.id = c.document_id AND d.status = 'ready'
			JOIN knowledge_bases k ON k.id = c.kb_id AND k.generation = c.generation,
			unnest(tsvector_to_array(c.tsv)) l(lexeme)
		WHERE c.kb_id = $1 GROUP BY l.lexeme`
	const stored = `SELECT word, chunks::bigint FROM kb_lexemes WHERE kb_id = $1 AND chunks <> 0`
	var words, diff, readyChunks int
	if err := k.store.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM (`+recount+`) r),
			(SELECT count(*) FROM ((`+stored+` EXCEPT `+recount+`) UNION ALL (`+recount+` EXCEPT `+stored+`)) x),
			(SELECT count(*) FROM kb_chunks c JOIN kb_documents d ON d.id = c.document_id AND d.status = 'ready'
				WHERE c.kb_id = $1 AND c.generation = $2)`,
		k.kb.ID, kb.Generation).Scan(&words, &diff, &readyChunks); err != nil {
		t.Fatal(err)
	}
	if words == 0 || diff != 0 {
		t.Errorf("the word counts differ from a recount of the chunks in %d of %d words", diff, words)
	}
	if kb.Chunks != readyChunks {
		t.Errorf("the knowledge base counts %d chunks, its ready documents have %d", kb.Chunks, readyChunks)
	}
}

func (k lockKB) chunkOf(t *testing.T, doc int64) int64 {
	t.Helper()
	var id int64
	if err := k.store.Pool.QueryRow(context.Background(), "SELECT min(id) FROM kb_chunks WHERE document_id = $1", doc).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// A language switch re-indexes every chunk and recounts every word in one
// transaction; documents finishing or deleted meanwhile wait for it (or it
// for them), never both for each other (issue 14 review).
func TestALanguageSwitchAndDocumentsFinishingOrDeletedMeanwhileDoNotDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a document finishes while the switch runs", func(t *testing.T) {
		t.Parallel()
		k := newLockKB(t)
		k.switchTo(t, "french")
		// The switch, its knowledge base locked, waits for one chunk.
		release := k.hold(t, "SELECT 1 FROM kb_chunks WHERE id = $1", k.chunkOf(t, k.ready.ID))
		sw := run("the switch", func() error { return k.store.SwitchLanguage(ctx, k.kb.ID) })
		k.waitBlocked(t, 1, sw)
		fin := run("finishing the document", func() error { return k.store.FinishIngest(ctx, k.mid.ID, "") })
		k.waitBlocked(t, 2, sw, fin)
		release()
		noDeadlock(t, sw)
		noDeadlock(t, fin)
		k.checkConsistent(t, "french")
	})

	t.Run("a document is deleted while the switch runs", func(t *testing.T) {
		t.Parallel()
		k := newLockKB(t)
		k.switchTo(t, "german")
		release := k.hold(t, "SELECT 1 FROM kb_chunks WHERE id = $1", k.chunkOf(t, k.mid.ID))
		sw := run("the switch", func() error { return k.store.SwitchLanguage(ctx, k.kb.ID) })
		k.waitBlocked(t, 1, sw)
		del := run("deleting the document", func() error { return k.store.DeleteDocument(ctx, k.user, k.ready.ID) })
		k.waitBlocked(t, 2, sw, del)
		release()
		noDeadlock(t, sw)
		noDeadlock(t, del)
		if err := k.store.FinishIngest(ctx, k.mid.ID, ""); err != nil {
			t.Fatal(err)
		}
		k.checkConsistent(t, "german")
	})

	t.Run("the switch starts while a document finishes", func(t *testing.T) {
		t.Parallel()
		k := newLockKB(t)
		k.switchTo(t, "french")
		// Finishing the document waits for one of the words it counts.
		release := k.hold(t, "SELECT 1 FROM kb_lexemes WHERE kb_id = $1 AND word = 'run'", k.kb.ID)
		fin := run("finishing the document", func() error { return k.store.FinishIngest(ctx, k.mid.ID, "") })
		k.waitBlocked(t, 1, fin)
		sw := run("the switch", func() error { return k.store.SwitchLanguage(ctx, k.kb.ID) })
		k.waitBlocked(t, 2, sw, fin)
		release()
		noDeadlock(t, fin)
		noDeadlock(t, sw)
		k.checkConsistent(t, "french")
	})

	t.Run("the switch starts while a document is deleted", func(t *testing.T) {
		t.Parallel()
		k := newLockKB(t)
		k.switchTo(t, "french")
		release := k.hold(t, "SELECT 1 FROM kb_lexemes WHERE kb_id = $1 AND word = 'run'", k.kb.ID)
		del := run("deleting the document", func() error { return k.store.DeleteDocument(ctx, k.user, k.ready.ID) })
		k.waitBlocked(t, 1, del)
		sw := run("the switch", func() error { return k.store.SwitchLanguage(ctx, k.kb.ID) })
		k.waitBlocked(t, 2, sw, del)
		release()
		noDeadlock(t, del)
		noDeadlock(t, sw)
		if err := k.store.FinishIngest(ctx, k.mid.ID, ""); err != nil {
			t.Fatal(err)
		}
		k.checkConsistent(t, "french")
	})
}

// Chunks re-embedded with a new model while the language switches are
// indexed in the new language: they wait for the switch, which had not
// seen them (issue 14 review).
func TestChunksReembeddedDuringALanguageSwitchAreIndexedInTheNewLanguage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := newLockKB(t)
	if err := k.store.FinishIngest(ctx, k.mid.ID, ""); err != nil {
		t.Fatal(err)
	}
	if err := k.store.StartReembed(ctx, k.user, k.kb.ID, "embedder-2", 3, func(pgx.Tx, db.KnowledgeBase) error { return nil }); err != nil {
		t.Fatal(err)
	}
	kb, err := k.store.KBForJob(ctx, k.kb.ID)
	if err != nil {
		t.Fatal(err)
	}
	pending, err := k.store.ChunksToReembed(ctx, kb, 0, 100)
	if err != nil || len(pending) != 4 {
		t.Fatalf("chunks to re-embed: %v, %d", err, len(pending))
	}
	vectors := make([][]float32, len(pending))
	for i := range vectors {
		vectors[i] = []float32{0, 1, float32(i)}
	}
	k.switchTo(t, "french")
	release := k.hold(t, "SELECT 1 FROM kb_chunks WHERE id = $1", pending[0].ID)
	sw := run("the switch", func() error { return k.store.SwitchLanguage(ctx, k.kb.ID) })
	k.waitBlocked(t, 1, sw)
	re := run("storing re-embedded chunks", func() error { return k.store.StoreReembedded(ctx, kb, pending, vectors) })
	k.waitBlocked(t, 2, sw, re)
	release()
	noDeadlock(t, sw)
	noDeadlock(t, re)

	var next, english int
	if err := k.store.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE lang <> 'french')
		FROM kb_chunks WHERE kb_id = $1 AND generation = $2`, kb.ID, kb.Generation+1).Scan(&next, &english); err != nil {
		t.Fatal(err)
	}
	if next != len(pending) || english != 0 {
		t.Fatalf("%d of the %d re-embedded chunks are not indexed in french", english, next)
	}
	swapped, err := k.store.SwapGeneration(ctx, kb.ID)
	if err != nil || !swapped {
		t.Fatalf("swap: %v, %v", err, swapped)
	}
	k.checkConsistent(t, "french")
}

// A delete, a request someone waits for, does not wait out a language
// switch of its knowledge base (minutes on a large one): after
// DeleteLockTimeout it says ErrBusy and the document stays; once the
// switch is done the delete goes through.
func TestADeleteDuringALanguageSwitchSaysBusyInsteadOfWaiting(t *testing.T) {
	k := newLockKB(t)
	ctx := context.Background()
	old := db.DeleteLockTimeout
	db.DeleteLockTimeout = 200 * time.Millisecond
	t.Cleanup(func() { db.DeleteLockTimeout = old })
	// What SwitchLanguage holds while it indexes the chunks again.
	tx, err := k.store.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM knowledge_bases WHERE id = $1 FOR NO KEY UPDATE", k.kb.ID); err != nil {
		t.Fatal(err)
	}
	err = k.store.DeleteDocument(ctx, k.user, k.ready.ID)
	if !errors.Is(err, db.ErrBusy) {
		t.Fatalf("a delete while the switch holds the knowledge base: %v, want ErrBusy", err)
	}
	if _, err := k.store.Document(ctx, k.user, k.ready.ID); err != nil {
		t.Fatalf("the document is gone after a refused delete: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := k.store.DeleteDocument(ctx, k.user, k.ready.ID); err != nil {
		t.Fatalf("a delete after the switch: %v", err)
	}
	if _, err := k.store.Document(ctx, k.user, k.ready.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("the document after its delete: %v", err)
	}
}
