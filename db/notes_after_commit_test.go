package db_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"weft/db"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// The notes a transaction's writes send go right after its commit, in the
// order they were made, and none when it rolls back: a listener never
// hears of a write it cannot read, nor of one that never happened. (They
// are not sent inside the transaction, where PostgreSQL's notify lock would
// be held for the whole cluster while the commit waits for the disk.)
func TestATransactionsNotesGoAfterItsCommitInOrderAndNoneOnRollback(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := testenv.NewDB(t)
	var mu sync.Mutex
	var got []db.Note
	ready := make(chan struct{})
	var once sync.Once
	go s.Listen(ctx, func() { once.Do(func() { close(ready) }) }, func(n db.Note) {
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
	})
	testwait.Closed(t, "the listener", 10*time.Second, ready)
	notes := func() []db.Note { mu.Lock(); defer mu.Unlock(); return append([]db.Note(nil), got...) }

	// Rolled back: nothing.
	failed := errors.New("rolled back")
	if err := s.InTx(ctx, func(tx pgx.Tx) error {
		if err := db.NoteThreadChanged(ctx, tx, 1); err != nil {
			return err
		}
		return failed
	}); !errors.Is(err, failed) {
		t.Fatalf("InTx = %v", err)
	}
	// Committed: its notes in order, once the commit is visible.
	if err := s.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "CREATE TABLE noted (id int)"); err != nil {
			return err
		}
		for _, id := range []int64{3, 2, 4} {
			if err := db.NoteThreadChanged(ctx, tx, id); err != nil {
				return err
			}
		}
		// Nothing was heard while the transaction is open.
		if n := notes(); len(n) != 0 {
			t.Errorf("notes heard before the commit: %v", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the committed transaction's notes", 0, func() bool { return len(notes()) >= 3 })
	want := []db.Note{{Kind: db.NoteThread, ID: 3}, {Kind: db.NoteThread, ID: 2}, {Kind: db.NoteThread, ID: 4}}
	if n := notes(); len(n) != 3 || n[0] != want[0] || n[1] != want[1] || n[2] != want[2] {
		t.Errorf("notes = %v, want %v (the rolled-back one never)", n, want)
	}
	var exists bool
	if err := s.Pool.QueryRow(ctx, "SELECT to_regclass('noted') IS NOT NULL").Scan(&exists); err != nil || !exists {
		t.Errorf("the committed write is not readable: %v, %v", exists, err)
	}
}
