package chat_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"weft/chat"
	"weft/db"
)

// waitCancelled waits, at the fake model, for n abandoned requests.
func (e *env) waitCancelled(n int, what string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.fake.WaitCancelled(ctx, n); err != nil {
		e.t.Fatalf("%s: the model kept writing (cancellations %d, want %d): %v", what, e.fake.Cancellations(), n, err)
	}
}

func TestDeletingAThreadCancelsItsAnswerAtTheModelAndItsQueuedRunNeverStarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	a := e.send(0, "[[slow:20ms]][[tokens:1000]]")
	b := e.send(a.Thread.ID, "queued behind the answer, never asked")
	if b.Run.Status != db.RunQueued {
		t.Fatalf("second run is %s, want queued", b.Run.Status)
	}
	if err := e.fake.WaitChunks(context.Background(), 0, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.DeleteThread(context.Background(), e.user.ID, a.Thread.ID); err != nil {
		t.Fatal(err)
	}
	e.waitCancelled(1, "thread deleted")
	if _, err := e.store.Thread(context.Background(), e.user.ID, a.Thread.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("the deleted thread reads back: %v", err)
	}
	// The queued run would have started as soon as the first one ended;
	// another answer on a new thread completing proves the runtime moved on.
	e.wait(e.send(0, "after the delete"))
	for _, r := range chatRequests(e.fake) {
		for _, m := range r.Chat.Messages {
			if m.Content == "queued behind the answer, never asked" {
				t.Fatal("the queued run of a deleted thread reached the model")
			}
		}
	}
}

// answeringOnA has instance A stream a long answer (a few chunks in) and
// returns a runtime of instance B on the same database. A's own progress
// rounds (which also find runs gone or asked to stop) are an hour apart:
// what stops its answer is B's note.
func answeringOnA(t *testing.T) (*env, *chat.Runtime, db.Sent) {
	t.Helper()
	e := newEnv(t, chat.Config{Instance: "A", FlushEvery: time.Hour})
	other := e.runtime(chat.Config{Instance: "B"})
	sent := e.send(0, "[[slow:20ms]][[tokens:1000]]")
	if err := e.fake.WaitChunks(context.Background(), 0, 3); err != nil {
		t.Fatal(err)
	}
	return e, other, sent
}

func TestDeletingAThreadOnAnotherInstanceCancelsTheAnswerWhereItRuns(t *testing.T) {
	t.Parallel()
	e, other, sent := answeringOnA(t)
	if _, err := other.DeleteThread(context.Background(), e.user.ID, sent.Thread.ID); err != nil {
		t.Fatal(err)
	}
	e.waitCancelled(1, "thread deleted on another instance")
}

func TestDeletingAMessageOnAnotherInstanceCancelsTheAnswerBelowItWhereItRuns(t *testing.T) {
	t.Parallel()
	e, other, sent := answeringOnA(t)
	// The run's row goes with the subtree; instance A hears of it.
	if _, err := other.DeleteMessage(context.Background(), e.user.ID, sent.User.ID); err != nil {
		t.Fatal(err)
	}
	e.waitCancelled(1, "message deleted on another instance")
}

func TestDeletingAnotherUsersThreadStopsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	sent := e.send(0, "[[slow:5ms]][[tokens:40]]")
	intruder, _ := e.newUser("intruder@example.com")
	if _, err := e.rt.DeleteThread(context.Background(), intruder.ID, sent.Thread.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("deleting someone else's thread: %v, want not found", err)
	}
	if run, _ := e.wait(sent); run.Status != db.RunCompleted {
		t.Fatalf("the owner's answer ended %s", run.Status)
	}
}

// failingStore is the real database, except that reading a thread's
// context sources fails like a broken query would.
type failingStore struct {
	*db.DB
}

var errSecretSQL = &pgconn.PgError{Code: "42P01", Message: `relation "secret_internal_table" does not exist`}

func (s failingStore) ContextSources(ctx context.Context, user, thread int64) (db.ContextSources, error) {
	return db.ContextSources{}, errSecretSQL
}

// lockedBuffer is a log sink safe for the runtime's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Not parallel: it replaces the default logger to read what was logged.
func TestADatabaseErrorDuringAnAnswerIsShownAsAGenericMessageAndLoggedInFull(t *testing.T) {
	var logs lockedBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	e := newEnv(t, chat.Config{})
	u, _ := url.Parse(e.fake.URL)
	client := chat.NewOllamaClient(u)
	rt := chat.New(failingStore{e.store}, client, chat.NewModels(client, e.fake.URL, "tiny", 0),
		chat.Config{Instance: "failing", OllamaHost: e.fake.URL})
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rt.Shutdown(ctx)
	})
	sent, err := rt.Send(context.Background(), e.user.ID, chat.Input{WorkspaceID: e.ws.ID, Content: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	run, m := e.wait(sent)
	if run.Status != db.RunFailed || m.Status != db.MsgError {
		t.Fatalf("run %s, message %s", run.Status, m.Status)
	}
	if m.Error != chat.GenericFailure {
		t.Fatalf("the user was shown %q, want the generic message", m.Error)
	}
	if !strings.Contains(logs.String(), "secret_internal_table") {
		t.Fatalf("the database error was not logged; log:\n%s", logs.String())
	}
}
