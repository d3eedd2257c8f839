package chat_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"weft/chat"
	"weft/db"
	"weft/internal/testwait"
)

// listening waits until rt's listener hears notes: a note about a thread
// nobody else watches is sent until rt's watcher of it wakes. Afterwards
// no wake of rt's first connection is still to come.
func listening(t *testing.T, store *db.DB, rt *chat.Runtime) {
	t.Helper()
	const sentinel = -1
	woke, stop := rt.WatchThread(sentinel)
	defer stop()
	testwait.For(t, "the runtime's listener to hear a note", 0, func() bool {
		if err := db.NoteThreadChanged(context.Background(), store.Pool, sentinel); err != nil {
			t.Fatal(err)
		}
		select {
		case <-woke:
			return true
		case <-time.After(20 * time.Millisecond):
			return false
		}
	})
}

// noteThread sends one thread note in a transaction of its own.
func noteThread(t *testing.T, store *db.DB, thread int64) {
	t.Helper()
	if err := store.InTx(context.Background(), func(tx pgx.Tx) error {
		return db.NoteThreadChanged(context.Background(), tx, thread)
	}); err != nil {
		t.Fatal(err)
	}
}

// pending reports whether ch holds a wake now, taking it.
func pending(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestAThreadNoteFromTheDatabaseWakesTheThreadsWatchersOnEveryRuntime(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noFlush)
	other := e.runtime(chat.Config{Instance: "B"})
	listening(t, e.store, e.rt)
	listening(t, e.store, other)
	onA, stopA := e.rt.WatchThread(7)
	defer stopA()
	onB, stopB := other.WatchThread(7)
	defer stopB()

	noteThread(t, e.store, 7)
	testwait.Recv(t, "the wake on A", 0, onA)
	testwait.Recv(t, "the wake on B, another runtime on the same database", 0, onB)
}

func TestAThreadNoteWakesOnlyThatThreadsWatchers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noFlush)
	listening(t, e.store, e.rt)
	seven, stop7 := e.rt.WatchThread(7)
	defer stop7()
	eight, stop8 := e.rt.WatchThread(8)
	defer stop8()
	nine, stop9 := e.rt.WatchThread(9)
	defer stop9()

	noteThread(t, e.store, 8)
	noteThread(t, e.store, 9)
	// Notes are taken in order on one connection: once 9's arrived, 8's
	// was taken too.
	testwait.Recv(t, "the wake of thread 9", 0, nine)
	if !pending(eight) {
		t.Fatal("thread 8's watcher was not woken by its note")
	}
	if pending(seven) {
		t.Fatal("thread 7's watcher was woken by notes about threads 8 and 9")
	}
	// A run's note with the same number is not a thread's.
	if err := e.store.Notify(context.Background(), db.NoteEnd, 7); err != nil {
		t.Fatal(err)
	}
	noteThread(t, e.store, 9)
	testwait.Recv(t, "the second wake of thread 9", 0, nine)
	if pending(seven) {
		t.Fatal("a note about run 7 woke the watcher of thread 7")
	}
}

func TestThreadWakesCoalesceWhileTheWatcherIsBusy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noFlush)
	listening(t, e.store, e.rt)
	woke, stop := e.rt.WatchThread(7)
	defer stop()
	marker, stopMarker := e.rt.WatchThread(8)
	defer stopMarker()

	for range 30 {
		noteThread(t, e.store, 7)
	}
	noteThread(t, e.store, 8)
	testwait.Recv(t, "the marker's wake after the thirty notes", 0, marker)
	if !pending(woke) {
		t.Fatal("thirty notes did not wake the watcher")
	}
	if pending(woke) {
		t.Fatal("thirty notes woke the watcher more than once; wakes should coalesce")
	}
}

func TestAThreadNoteSentInATransactionArrivesOnlyAtItsCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noFlush)
	listening(t, e.store, e.rt)
	woke, stop := e.rt.WatchThread(7)
	defer stop()
	marker, stopMarker := e.rt.WatchThread(8)
	defer stopMarker()

	ctx := context.Background()
	tx, err := e.store.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := db.NoteThreadChanged(ctx, tx, 7); err != nil {
		t.Fatal(err)
	}
	noteThread(t, e.store, 8) // committed after the open transaction's note was sent
	testwait.Recv(t, "the marker's wake", 0, marker)
	if pending(woke) {
		t.Fatal("the watcher woke before the transaction that noted the change committed")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.Recv(t, "the wake at the commit", 0, woke)
}

func TestAStoppedThreadWatcherIsNoLongerWoken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noFlush)
	listening(t, e.store, e.rt)
	woke, stop := e.rt.WatchThread(7)
	marker, stopMarker := e.rt.WatchThread(8)
	defer stopMarker()
	stop()
	stop() // twice is harmless

	noteThread(t, e.store, 7)
	noteThread(t, e.store, 8)
	testwait.Recv(t, "the marker's wake", 0, marker)
	if pending(woke) {
		t.Fatal("a stopped watcher was woken")
	}
}

func TestThreadWatchersWakeWhenTheListenerReconnects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noFlush)
	listening(t, e.store, e.rt)
	woke, stop := e.rt.WatchThread(7)
	defer stop()
	// The listening connection goes: notes sent meanwhile are lost, so the
	// watcher must read its thread again once the listener is back.
	var n int
	if err := e.store.Pool.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN `+db.RunChannel+`' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d listening connections, want 1", n)
	}
	testwait.Recv(t, "the wake after the listener reconnected", 0, woke)
}
