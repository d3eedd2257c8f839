package chat

import (
	"testing"
	"time"
)

// A follower's note can arrive between the run's claim and its start here:
// the interest is kept until the run is added, then it is saved fast.
func TestAFollowNoteBeforeTheRunStartsHereStillMakesItSavedFast(t *testing.T) {
	w := newProgressWriter(nil, time.Hour, time.Millisecond)
	w.follow(42, time.Now().Add(time.Minute))
	if w.anyFollowed() {
		t.Fatal("a run not live here counts as followed")
	}
	w.add(&liveRun{id: 42})
	if !w.anyFollowed() {
		t.Fatal("the follow note that came before the run started was lost")
	}
	select {
	case <-w.wakeC:
	default:
		t.Error("adding a followed run did not start a round")
	}

	// Interest that expired before the run came is dropped, and so is
	// interest in runs that never come.
	w.follow(43, time.Now().Add(-time.Second))
	w.follow(44, time.Now().Add(-time.Second))
	w.add(&liveRun{id: 43})
	w.mu.Lock()
	_, fast := w.followed[43]
	w.mu.Unlock()
	if fast {
		t.Error("an expired follow note made a run fast")
	}
	w.anyFollowed()
	w.mu.Lock()
	left := len(w.pendingFollow)
	w.mu.Unlock()
	if left != 0 {
		t.Errorf("%d expired follow notes are kept", left)
	}
}
