package chat

import (
	"context"
	"fmt"

	"weft/db"
)

// ThreadTail is what a thread page's live watch (issue 21) reads when the
// thread may have changed: where its active branch ends now, and what was
// added to it after the message the page shows last.
type ThreadTail struct {
	// Leaf is the thread's active leaf (0: it has no messages).
	Leaf int64
	// Extends says the active branch runs through the message shown (or,
	// when the page shows none, from the thread's root): the page can go
	// on with Items. Otherwise the branch moved away from the page
	// (another branch chosen, a message edited, answered again or deleted).
	Extends bool
	// Items are, when the branch extends the page, the messages after the
	// one shown, oldest first, at most a page (PathPageSize).
	Items []MessageItem
	// Shown is the message shown as it is now when it is the active leaf
	// and being written (Continue or Resume start a new run on it).
	Shown *MessageItem
}

// ThreadTail reads one of user's threads from one snapshot, for a page
// whose last message is shown (0: the page shows no message).
func (rt *Runtime) ThreadTail(ctx context.Context, user, thread, shown int64) (ThreadTail, error) {
	var v ThreadTail
	err := rt.store.ReadSnapshot(ctx, func(s *db.DB) error {
		t, err := s.Thread(ctx, user, thread)
		if err != nil {
			return err
		}
		if t.ActiveLeafID != nil {
			v.Leaf = *t.ActiveLeafID
		}
		msgs, err := s.BranchFrom(ctx, user, thread, shown, PathPageSize+1)
		if err != nil {
			return err
		}
		switch {
		case shown == 0:
			v.Extends = len(msgs) == 0 || msgs[0].ParentID == nil
		case len(msgs) > 0 && msgs[0].ID == shown:
			v.Extends = true
			if msgs[0].Status == db.MsgStreaming && v.Leaf == shown {
				items, err := messageItems(ctx, s, user, t, msgs[:1])
				if err != nil {
					return err
				}
				v.Shown = &items[0]
			}
			msgs = msgs[1:]
		}
		if !v.Extends || len(msgs) == 0 {
			return nil
		}
		v.Items, err = messageItems(ctx, s, user, t, msgs[:min(len(msgs), PathPageSize)])
		return err
	})
	if err != nil {
		return ThreadTail{}, fmt.Errorf("read the tail of thread %d: %w", thread, err)
	}
	return v, nil
}
