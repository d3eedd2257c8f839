package db_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"weft/db"
	"weft/internal/testenv"
)

// Memories are the user's alone: another user's id is not found, never
// listed, never in their overview; the same fact kept twice is one memory;
// forget by text deletes only an unambiguous match; the cap holds; a
// temporary thread neither writes nor reads them.
func TestMemoriesArePerUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	alice, aws := newUser(t, store, "mem-alice@example.com")
	bob, bws := newUser(t, store, "mem-bob@example.com")
	var aThread, bThread int64
	for _, x := range []struct {
		id   *int64
		ws   int64
		user int64
	}{{&aThread, aws.ID, alice.ID}, {&bThread, bws.ID, bob.ID}} {
		if err := store.Pool.QueryRow(ctx, `INSERT INTO threads (workspace_id, owner_id, title) VALUES ($1, $2, 't') RETURNING id`,
			x.ws, x.user).Scan(x.id); err != nil {
			t.Fatal(err)
		}
	}

	m, err := store.AddMemory(ctx, alice.ID, db.MemoryInput{Fact: "  likes   CANARY-7 tea ", Source: db.MemoryAgent, Thread: aThread})
	if err != nil {
		t.Fatal(err)
	}
	if m.Fact != "likes CANARY-7 tea" || m.ThreadID == nil || *m.ThreadID != aThread {
		t.Fatalf("memory = %+v", m)
	}
	again, err := store.AddMemory(ctx, alice.ID, db.MemoryInput{Fact: "Likes canary-7 tea", Source: db.MemoryManual})
	if err != nil || again.ID != m.ID {
		t.Fatalf("the same fact again = %+v, %v; want memory %d", again, err, m.ID)
	}
	// Bob naming Alice's thread does not record it as his source.
	bm, err := store.AddMemory(ctx, bob.ID, db.MemoryInput{Fact: "bob fact", Source: db.MemoryAgent, Thread: aThread})
	if err != nil || bm.ThreadID != nil {
		t.Fatalf("bob's memory = %+v, %v", bm, err)
	}

	if _, err := store.Memory(ctx, bob.ID, m.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("bob reads alice's memory: %v", err)
	}
	if err := store.UpdateMemory(ctx, bob.ID, m.ID, "x"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("bob edits alice's memory: %v", err)
	}
	if err := store.DeleteMemory(ctx, bob.ID, m.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("bob deletes alice's memory: %v", err)
	}
	if _, err := store.ForgetMemory(ctx, bob.ID, "canary-7"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("bob forgets alice's memory: %v", err)
	}
	list, err := store.Memories(ctx, bob.ID)
	if err != nil || len(list) != 1 || list[0].ID != bm.ID {
		t.Fatalf("bob's memories = %+v, %v", list, err)
	}
	ov, err := store.MemoryOverview(ctx, alice.ID, aThread)
	if err != nil || !strings.Contains(ov, fmt.Sprintf("[%d] likes CANARY-7 tea", m.ID)) {
		t.Fatalf("alice's overview = %q, %v", ov, err)
	}
	for _, th := range []int64{bThread, aThread} {
		ov, err := store.MemoryOverview(ctx, bob.ID, th)
		if err != nil || strings.Contains(ov, "CANARY") {
			t.Fatalf("bob's overview in thread %d = %q, %v", th, ov, err)
		}
	}

	// A temporary thread neither writes nor reads memories.
	if err := store.SetThreadTemporary(ctx, alice.ID, aThread, true); err != nil {
		t.Fatal(err)
	}
	if _, err := store.AddMemory(ctx, alice.ID, db.MemoryInput{Fact: "secret", Source: db.MemoryAgent, Thread: aThread}); !errors.Is(err, db.ErrMemoryTemporary) {
		t.Fatalf("a temporary thread writes a memory: %v", err)
	}
	if ov, err := store.MemoryOverview(ctx, alice.ID, aThread); err != nil || ov != "" {
		t.Fatalf("a temporary thread's overview = %q, %v", ov, err)
	}
	if err := store.SetThreadTemporary(ctx, bob.ID, aThread, false); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("bob switches alice's thread: %v", err)
	}

	// Forget by text: ambiguous deletes nothing, exact deletes one.
	if _, err := store.AddMemory(ctx, alice.ID, db.MemoryInput{Fact: "likes coffee", Source: db.MemoryManual}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ForgetMemory(ctx, alice.ID, "likes"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("an ambiguous forget: %v", err)
	}
	if f, err := store.ForgetMemory(ctx, alice.ID, "LIKES COFFEE"); err != nil || f.Fact != "likes coffee" {
		t.Fatalf("forget = %+v, %v", f, err)
	}

	// The cap.
	for i := len(mustMemories(t, store, alice.ID)); i < db.MaxMemories; i++ {
		if _, err := store.AddMemory(ctx, alice.ID, db.MemoryInput{Fact: fmt.Sprintf("fact %d", i), Source: db.MemoryManual}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.AddMemory(ctx, alice.ID, db.MemoryInput{Fact: "one too many", Source: db.MemoryManual}); !errors.Is(err, db.ErrMemoryFull) {
		t.Fatalf("past the cap: %v", err)
	}
	if _, err := store.AddMemory(ctx, alice.ID, db.MemoryInput{Fact: strings.Repeat("x", db.MaxMemoryChars+1), Source: db.MemoryManual}); err == nil {
		t.Fatal("a fact over the limit was kept")
	}
	// The overview stays within its caps.
	if err := store.SetThreadTemporary(ctx, alice.ID, aThread, false); err != nil {
		t.Fatal(err)
	}
	ov, err = store.MemoryOverview(ctx, alice.ID, aThread)
	if err != nil || len(ov) > db.MemoryOverviewBytes || strings.Count(ov, "\n- ") > db.MemoryOverviewFacts {
		t.Fatalf("overview of %d bytes, %d facts: %v", len(ov), strings.Count(ov, "\n- "), err)
	}
}

func mustMemories(t *testing.T, store *db.DB, user int64) []db.Memory {
	t.Helper()
	list, err := store.Memories(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// A memory outlives the thread it was remembered in: the thread's deletion
// leaves it, without a source thread.
func TestAMemoryOutlivesItsThread(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "mem-outlive@example.com")
	sent := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Title: "t", Content: "hi"})
	m, err := store.AddMemory(ctx, u.ID, db.MemoryInput{Fact: "kept", Source: db.MemoryAgent, Thread: sent.Thread.ID})
	if err != nil || m.ThreadID == nil {
		t.Fatalf("memory = %+v, %v", m, err)
	}
	if _, err := store.DeleteThread(ctx, u.ID, sent.Thread.ID); err != nil {
		t.Fatal(err)
	}
	got, err := store.Memory(ctx, u.ID, m.ID)
	if err != nil || got.ThreadID != nil || got.Fact != "kept" {
		t.Fatalf("after the thread's deletion: %+v, %v", got, err)
	}
}
