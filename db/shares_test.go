package db_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"

	"weft/db"
	"weft/internal/testenv"
)

func tokenSum(tok string) []byte {
	s := sha256.Sum256([]byte(tok))
	return s[:]
}

// A share holds the path as it was when made: a branch left and a message
// sent later are not on it, an answer still being written is left out until
// it is final, and older messages come in pages above a message of the path.
func TestASharedPathIsTheActivePathWhenMadeWithFinalMessagesOnly(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	u, ws := newUser(t, store, "owner@example.com")
	b := newBranched(t, store, u.ID, ws.ID)
	q3 := send(t, store, u.ID, db.Send{ThreadID: b.thread, Content: "q3"}) // its answer is streaming

	s, err := store.CreateShare(ctx, u.ID, b.thread, db.NewShare{TokenSHA256: tokenSum("t1"), TokenHint: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if s.LeafMessageID != q3.Assistant.ID {
		t.Fatalf("the share's leaf is %d, want the active leaf %d", s.LeafMessageID, q3.Assistant.ID)
	}
	shown := func(before int64, limit int) ([]string, bool) {
		t.Helper()
		path, more, err := store.SharedPath(ctx, s, before, limit)
		if err != nil {
			t.Fatal(err)
		}
		return contents(path), more
	}
	if got, _ := shown(0, 100); !slices.Equal(got, []string{"q1", "a1", "q2 edited", "a2 edited", "q3"}) {
		t.Errorf("while the last answer streams the share shows %q", got)
	}
	finish(t, store, q3, "a3")
	send(t, store, u.ID, db.Send{ThreadID: b.thread, Content: "q4 later"})
	if got, more := shown(0, 100); !slices.Equal(got, []string{"q1", "a1", "q2 edited", "a2 edited", "q3", "a3"}) || more {
		t.Errorf("the share shows %q (more %v)", got, more)
	}
	if got, more := shown(0, 2); !slices.Equal(got, []string{"q3", "a3"}) || !more {
		t.Errorf("the last page of 2: %q (more %v)", got, more)
	}
	if got, more := shown(q3.User.ID, 2); !slices.Equal(got, []string{"q2 edited", "a2 edited"}) || !more {
		t.Errorf("the page above q3: %q (more %v)", got, more)
	}
	if got, more := shown(b.q2e, 2); !slices.Equal(got, []string{"q1", "a1"}) || more {
		t.Errorf("the first page: %q (more %v)", got, more)
	}
	if got, _ := shown(b.q2, 100); len(got) != 0 {
		t.Errorf("above a message off the path the share shows %q", got)
	}
}

// A share opens by its token until it expires or is revoked, or its owner
// is disabled; another user can neither make, list nor revoke the owner's.
func TestAShareOpensByTokenUntilExpiredRevokedOrItsOwnerDisabled(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	u, ws := newUser(t, store, "owner@example.com")
	other, _ := newUser(t, store, "other@example.com")
	q := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "q"})
	finish(t, store, q, "a")
	now := time.Now()
	day := now.Add(24 * time.Hour)
	s, err := store.CreateShare(ctx, u.ID, q.Thread.ID, db.NewShare{TokenSHA256: tokenSum("day"), TokenHint: "day", ExpiresAt: &day})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := store.ShareByToken(ctx, tokenSum("day"), now); err != nil || got.ID != s.ID || got.ThreadID != q.Thread.ID {
		t.Fatalf("by token: %+v %v", got, err)
	}
	for _, at := range []time.Time{day, day.Add(time.Second)} {
		if _, err := store.ShareByToken(ctx, tokenSum("day"), at); !errors.Is(err, db.ErrNotFound) {
			t.Errorf("at %v the share still opens (%v)", at, err)
		}
	}
	if _, err := store.ShareByToken(ctx, tokenSum("other"), now); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("an unknown token: %v", err)
	}

	if _, err := store.CreateShare(ctx, other.ID, q.Thread.ID, db.NewShare{TokenSHA256: tokenSum("x"), TokenHint: "x"}); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("another user shared my thread: %v", err)
	}
	if list, err := store.ThreadShares(ctx, other.ID, q.Thread.ID); err != nil || len(list) != 0 {
		t.Errorf("another user lists %d of my links (%v)", len(list), err)
	}
	if _, err := store.RevokeShare(ctx, other.ID, s.ID); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("another user revoked my link: %v", err)
	}

	forever, err := store.CreateShare(ctx, u.ID, q.Thread.ID, db.NewShare{TokenSHA256: tokenSum("forever"), TokenHint: "fore"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Pool.Exec(ctx, "UPDATE users SET disabled = true WHERE id = $1", u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ShareByToken(ctx, tokenSum("forever"), now); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("a disabled owner's link opens: %v", err)
	}
	if _, err := store.Pool.Exec(ctx, "UPDATE users SET disabled = false WHERE id = $1", u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := store.RevokeShare(ctx, u.ID, forever.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ShareByToken(ctx, tokenSum("forever"), now); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("a revoked link opens: %v", err)
	}
}
