package chat

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"weft/db"
)

// progressWriter saves the text of every live run of this instance, off
// the token path: every FlushEvery (or at once when woken, at a
// thinking→answer boundary) one round writes what each run gained since
// its last save, for all runs in one transaction (db.SaveProgress:
// append-only rows, an asynchronous commit), and reads in the same round
// trip which runs were asked to stop elsewhere. A failed round changes
// nothing: the next one sends the same text again under the same
// sequence numbers, with whatever came since.
type progressWriter struct {
	store Store
	every time.Duration
	fast  time.Duration // rounds of the runs followed elsewhere

	followed map[int64]time.Time // run → until when it is followed (guarded by mu)
	// run → until when: followed before it was added here (guarded by mu)
	pendingFollow map[int64]time.Time

	round sync.Mutex // held for a round: forget waits for the one in flight
	mu    sync.Mutex
	runs  map[int64]*liveRun

	wakeC chan struct{}
	stopC chan struct{}
	done  chan struct{} // closed when the loop ended (nil: never started)
}

func newProgressWriter(store Store, every, fast time.Duration) *progressWriter {
	return &progressWriter{store: store, every: every, fast: fast, runs: map[int64]*liveRun{},
		followed: map[int64]time.Time{}, pendingFollow: map[int64]time.Time{}, wakeC: make(chan struct{}, 1), stopC: make(chan struct{})}
}

// start runs the writer until stop.
func (w *progressWriter) start() {
	w.done = make(chan struct{})
	go func() {
		defer close(w.done)
		t := time.NewTicker(w.every)
		defer t.Stop()
		// While some run is followed from another instance, a fast round
		// saves just those runs every w.fast.
		fast := time.NewTicker(w.fast)
		defer fast.Stop()
		for {
			var fastC <-chan time.Time
			if w.anyFollowed() {
				fastC = fast.C
			}
			select {
			case <-w.stopC:
				w.write(nil)
				return
			case <-t.C:
			case <-w.wakeC:
			case <-fastC:
				w.writeFollowed()
				continue
			}
			w.write(nil)
		}
	}()
}

// follow saves run's progress every w.fast until then (someone follows it
// from another instance), beginning with a round now. A run not saved here
// yet keeps the interest until it is added: the follower's note can come
// between the run's claim and its start, and would otherwise be lost until
// the follower renews it (followRenew), its first seconds saved slowly.
func (w *progressWriter) follow(run int64, until time.Time) {
	w.mu.Lock()
	_, known := w.runs[run]
	if known {
		w.followed[run] = until
	} else {
		w.pendingFollow[run] = until
	}
	w.mu.Unlock()
	if known {
		w.wake()
	}
}

// anyFollowed reports whether a run is followed elsewhere, forgetting the
// interest that expired.
func (w *progressWriter) anyFollowed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for id, until := range w.followed {
		if now.After(until) {
			delete(w.followed, id)
		}
	}
	for id, until := range w.pendingFollow {
		if now.After(until) {
			delete(w.pendingFollow, id) // a run of another instance, or one that never started
		}
	}
	return len(w.followed) > 0
}

// writeFollowed is a round of the runs followed elsewhere that have text
// to save.
func (w *progressWriter) writeFollowed() {
	w.mu.Lock()
	var runs []*liveRun
	for id := range w.followed {
		if lr := w.runs[id]; lr != nil && lr.hasUnsaved() {
			runs = append(runs, lr)
		}
	}
	w.mu.Unlock()
	if len(runs) > 0 {
		w.writeRuns(runs, true)
	}
}

// stop writes what is pending and ends the loop.
func (w *progressWriter) stop() {
	if w.done == nil {
		return
	}
	select {
	case <-w.stopC:
	default:
		close(w.stopC)
	}
	<-w.done
}

// add saves lr's text from now on.
func (w *progressWriter) add(lr *liveRun) {
	w.mu.Lock()
	w.runs[lr.id] = lr
	until, pending := w.pendingFollow[lr.id]
	if pending {
		delete(w.pendingFollow, lr.id)
		pending = time.Now().Before(until)
		if pending {
			w.followed[lr.id] = until
		}
	}
	w.mu.Unlock()
	if pending {
		w.wake()
	}
}

// forget stops saving lr's text; when it returns no round writes it any
// more (the run's final write may delete its progress).
func (w *progressWriter) forget(lr *liveRun) {
	w.round.Lock()
	defer w.round.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.runs, lr.id)
	delete(w.followed, lr.id)
}

// flushNow writes lr's pending text at once and forgets it (a run left
// waiting for its user when this instance stops: its text stays in the
// database for whichever instance adopts it).
func (w *progressWriter) flushNow(lr *liveRun) {
	w.write(lr)
	w.forget(lr)
}

// wake asks for a round now; it never blocks.
func (w *progressWriter) wake() {
	select {
	case w.wakeC <- struct{}{}:
	default:
	}
}

// write is one round, over every run (only: just that one).
func (w *progressWriter) write(only *liveRun) {
	if only != nil {
		w.writeRuns([]*liveRun{only}, false)
		return
	}
	w.mu.Lock()
	runs := make([]*liveRun, 0, len(w.runs))
	for _, lr := range w.runs {
		runs = append(runs, lr)
	}
	w.mu.Unlock()
	w.writeRuns(runs, true)
}

// writeRuns saves runs' text; stopping says whether the runs asked to stop
// (or gone) are stopped here.
func (w *progressWriter) writeRuns(runs []*liveRun, stopping bool) {
	w.round.Lock()
	defer w.round.Unlock()
	w.mu.Lock()
	kept := runs[:0]
	for _, lr := range runs {
		if _, ok := w.runs[lr.id]; ok {
			kept = append(kept, lr) // not forgotten while we waited for the round
		}
	}
	w.mu.Unlock()
	runs = kept
	if len(runs) == 0 {
		return
	}
	var parts []db.Progress
	var marks []progressMark
	ids := make([]int64, 0, len(runs))
	byID := make(map[int64]*liveRun, len(runs))
	w.mu.Lock()
	for _, lr := range runs {
		ids, byID[lr.id] = append(ids, lr.id), lr
		if p, m, ok := lr.unsaved(); ok {
			if _, followed := w.followed[lr.id]; !followed {
				p.Run = 0 // nobody elsewhere waits for its note
			}
			parts, marks = append(parts, p), append(marks, m)
		}
	}
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stop, broken, err := w.store.SaveProgress(ctx, parts, ids)
	if err != nil {
		slog.Warn("save answers' progress", "runs", len(ids), "err", err)
		return
	}
	gap := make(map[int64]bool, len(broken))
	for _, msg := range broken {
		gap[msg] = true
	}
	for _, m := range marks {
		if gap[m.lr.msgID] {
			// Its previous row was lost (an acknowledged asynchronous
			// commit gone with a PostgreSQL crash): the next round writes
			// all of its text anew.
			slog.Warn("an answer's saved progress has a gap; writing it anew", "run", m.lr.id)
			m.lr.rewrite()
			continue
		}
		m.lr.markSaved(m)
	}
	for _, id := range stop {
		if stopping {
			byID[id].stop(StopUser)
		}
	}
}
