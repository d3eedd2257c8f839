package db_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
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

// planNode is a node of EXPLAIN (FORMAT JSON).
type planNode struct {
	Type  string     `json:"Node Type"`
	Rows  float64    `json:"Actual Rows"`
	Loops float64    `json:"Actual Loops"`
	Plans []planNode `json:"Plans"`
}

// walked runs sql under EXPLAIN ANALYZE and returns how many messages its
// walk up the path (the recursive union) went through.
func walked(t *testing.T, store *db.DB, sql string, args ...any) int {
	t.Helper()
	var plan []struct {
		Plan planNode `json:"Plan"`
	}
	if err := store.Pool.QueryRow(context.Background(), "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil || len(plan) != 1 {
		t.Fatalf("explain: %v", err)
	}
	var find func(n planNode) int
	find = func(n planNode) int {
		if n.Type == "Recursive Union" {
			return int(n.Rows * n.Loops)
		}
		for _, c := range n.Plans {
			if r := find(c); r >= 0 {
				return r
			}
		}
		return -1
	}
	n := find(plan[0].Plan)
	if n < 0 {
		t.Fatal("the plan has no walk up the path")
	}
	return n
}

// A link's file is found by walking up from the link's leaf only as far as
// the file's message: every thumbnail of a page is a request of its own,
// and one of the newest messages costs a few steps however long the path
// is. A file of the first message is still found, one off the path not.
func TestASharedFileOfTheNewestMessagesCostsAFewStepsOfALongPath(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	u, ws := newUser(t, store, "owner@example.com")
	var thread int64
	if err := store.Pool.QueryRow(ctx, `INSERT INTO threads (workspace_id, owner_id, title, model) VALUES ($1, $2, 'long', 'tiny') RETURNING id`,
		ws.ID, u.ID).Scan(&thread); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Pool.Exec(ctx, fmt.Sprintf(`DO $$
		DECLARE parent bigint; i int;
		BEGIN
			FOR i IN 1..400 LOOP
				INSERT INTO messages (thread_id, parent_id, role, content, status)
				VALUES (%d, parent, CASE WHEN i %% 2 = 1 THEN 'user' ELSE 'assistant' END, 'message ' || i, 'complete')
				RETURNING id INTO parent;
			END LOOP;
			UPDATE threads SET active_leaf_id = parent WHERE id = %d;
		END $$`, thread, thread)); err != nil {
		t.Fatal(err)
	}
	var root, question, leaf int64
	if err := store.Pool.QueryRow(ctx, `SELECT min(id), (SELECT parent_id FROM messages WHERE id = max(m.id)), max(id) FROM messages m WHERE thread_id = $1`,
		thread).Scan(&root, &question, &leaf); err != nil {
		t.Fatal(err)
	}
	attach := func(msg int64) int64 {
		var id int64
		if err := store.Pool.QueryRow(ctx, `INSERT INTO attachments (owner_id, message_id, sha256, name, mime) VALUES ($1, $2, 'x', 'a.txt', 'text/plain')
			RETURNING id`, u.ID, msg).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	near, far := attach(question), attach(root)
	var pic int64
	if err := store.Pool.QueryRow(ctx, `INSERT INTO media (message_id, kind, sha256, mime, status) VALUES ($1, 'image', 'y', 'image/png', 'ready')
		RETURNING id`, leaf).Scan(&pic); err != nil {
		t.Fatal(err)
	}
	// Off the path: a new branch beside the last answer.
	var aside int64
	if err := store.Pool.QueryRow(ctx, `INSERT INTO messages (thread_id, parent_id, role, content, status) VALUES ($1, $2, 'assistant', 'aside', 'complete')
		RETURNING id`, thread, question).Scan(&aside); err != nil {
		t.Fatal(err)
	}
	off := attach(aside)

	s, err := store.CreateShare(ctx, u.ID, thread, db.NewShare{TokenSHA256: tokenSum("files"), TokenHint: "files", IncludeFiles: true})
	if err != nil || s.LeafMessageID != leaf {
		t.Fatalf("share: %+v %v", s, err)
	}
	for _, id := range []int64{near, far} {
		if a, err := store.SharedAttachment(ctx, s, id); err != nil || a.ID != id {
			t.Errorf("attachment %d of the path: %+v %v", id, a, err)
		}
	}
	if m, err := store.SharedMedia(ctx, s, pic); err != nil || m.ID != pic {
		t.Errorf("media of the leaf: %+v %v", m, err)
	}
	if _, err := store.SharedAttachment(ctx, s, off); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("an attachment off the path: %v", err)
	}
	if n := walked(t, store, db.SharedAttachmentSQL, s.LeafMessageID, s.OwnerID, s.ThreadID, near); n > 2 {
		t.Errorf("finding a file of the last question walked %d messages of the path", n)
	}
	if n := walked(t, store, db.SharedMediaSQL, s.LeafMessageID, s.OwnerID, s.ThreadID, pic); n > 1 {
		t.Errorf("finding a file of the last answer walked %d messages of the path", n)
	}
}
