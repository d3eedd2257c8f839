package chat

import (
	"context"
	"fmt"

	"weft/db"
)

// PathPageSize is how many messages of a branch one page of a thread shows.
const PathPageSize = 100

// ThreadView is everything the thread page shows of one thread, read from
// one snapshot: a streaming answer always comes with its run, and an answer
// shown without one is final.
type ThreadView struct {
	Thread    db.Thread
	Workspace db.Workspace
	// Messages are the last page of the branch shown; More says there are
	// older ones above.
	Messages []MessageItem
	More     bool
	// OtherBranch is the leaf of the branch shown when it is not the saved
	// one new messages continue (0 otherwise).
	OtherBranch int64
	// AwaitTitle says the generated title may still arrive: the title is
	// provisional and an answer is complete.
	AwaitTitle bool
	Roles      []db.Role
	Usage      db.UsageTotals
	// KBs are the workspace's knowledge bases, Attached those the thread
	// searches.
	KBs      []db.KnowledgeBase
	Attached []db.KnowledgeBase
}

// ThreadView reads one of user's threads as its page shows it: the saved
// active branch or, with at (a message, from a search result), the branch
// through that message, shown without changing the saved one.
func (rt *Runtime) ThreadView(ctx context.Context, user, thread, at int64) (ThreadView, error) {
	var v ThreadView
	err := rt.store.ReadSnapshot(ctx, func(s *db.DB) error {
		var err error
		if v.Thread, err = s.Thread(ctx, user, thread); err != nil {
			return err
		}
		if v.Workspace, err = s.Workspace(ctx, user, v.Thread.WorkspaceID); err != nil {
			return err
		}
		msgs, err := branchPage(ctx, s, user, at, &v)
		if err != nil {
			return err
		}
		if v.Messages, err = messageItems(ctx, s, user, v.Thread, msgs); err != nil {
			return err
		}
		if v.Roles, err = s.Roles(ctx, user); err != nil {
			return err
		}
		if v.Usage, err = s.ThreadUsage(ctx, user, thread); err != nil {
			return err
		}
		if v.KBs, err = s.KBs(ctx, user, v.Workspace.ID); err != nil {
			return err
		}
		v.Attached, err = s.ThreadKBs(ctx, user, thread)
		return err
	})
	if err != nil {
		return ThreadView{}, fmt.Errorf("read thread %d: %w", thread, err)
	}
	v.AwaitTitle = v.Thread.TitleState == db.TitleProvisional && hasCompleteAnswer(v.Messages)
	return v, nil
}

// branchPage reads the last page of the branch v's page shows (see
// ThreadView), setting v.More and v.OtherBranch.
func branchPage(ctx context.Context, s *db.DB, user, at int64, v *ThreadView) ([]db.Message, error) {
	if at > 0 {
		leaf, th, err := s.NewestLeafUnder(ctx, user, at)
		if err == nil && th == v.Thread.ID {
			msgs, more, err := s.PathTo(ctx, user, leaf, PathPageSize)
			if l := v.Thread.ActiveLeafID; l == nil || *l != leaf {
				v.OtherBranch = leaf
			}
			v.More = more
			return msgs, err
		}
	}
	msgs, more, err := s.ActivePath(ctx, user, v.Thread.ID, PathPageSize)
	v.More = more
	return msgs, err
}

// hasCompleteAnswer reports whether a complete answer is among items (then
// a generated title may be on its way).
func hasCompleteAnswer(items []MessageItem) bool {
	for _, it := range items {
		if it.Message.Role == db.RoleAssistant && it.Message.Status == db.MsgComplete {
			return true
		}
	}
	return false
}

// HistoryView is the page of a thread's branch above a message, loaded when
// the reader scrolls up.
type HistoryView struct {
	Thread   db.Thread
	Messages []MessageItem // empty: the message is the first of the thread
	More     bool
}

// History reads the page of the branch above before, a message of one of
// user's threads, from one snapshot. A message of another thread is
// db.ErrNotFound.
func (rt *Runtime) History(ctx context.Context, user, thread, before int64) (HistoryView, error) {
	var v HistoryView
	err := rt.store.ReadSnapshot(ctx, func(s *db.DB) error {
		m, err := s.Message(ctx, user, before)
		if err != nil {
			return err
		}
		if m.ThreadID != thread {
			return db.ErrNotFound
		}
		if v.Thread, err = s.Thread(ctx, user, thread); err != nil || m.ParentID == nil {
			return err
		}
		msgs, more, err := s.PathTo(ctx, user, *m.ParentID, PathPageSize)
		if err != nil {
			return err
		}
		v.More = more
		v.Messages, err = messageItems(ctx, s, user, v.Thread, msgs)
		return err
	})
	if err != nil {
		return HistoryView{}, fmt.Errorf("read the history of thread %d: %w", thread, err)
	}
	return v, nil
}
