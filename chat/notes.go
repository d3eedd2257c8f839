package chat

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"weft/db"
)

// How instances talk (db.RunChannel): every runtime listens on one
// connection of its own, and the database's writes of runs notify in the
// same transaction (or right after the commit), so a note is never heard
// before its data can be read:
//
//   - progress saved (db.NoteProgress, only for runs followed elsewhere)
//     or a queued run started (db.NoteStarted): followers of the run on
//     this instance read it at once;
//   - Stop asked (db.NoteStop): the run is stopped here if it is live here;
//   - the run ended (db.NoteEnd): followers read its final message;
//   - a step was added from outside the run (db.NoteStepped, a /steer):
//     its watchers here read its steps;
//   - someone follows the run elsewhere (db.NoteFollow, renewed by the
//     follower): while it is live here its progress is saved every
//     FollowedFlushEvery instead of FlushEvery;
//   - a user has queued runs that may start (db.NoteQueued): this instance
//     tries to claim them.
//
// Notes sent while the connection is down are lost: after every
// (re)connection each follower reads its run again, the live runs' stop
// flags are read (a progress round), queued runs are tried and every
// thread watcher is woken.

const (
	followRenew = 2 * time.Second // a follower elsewhere renews its interest
	followTTL   = 5 * time.Second // interest not renewed this long expires
)

// notes holds who on this instance waits for notes of which run or thread.
type notes struct {
	mu       sync.Mutex
	watchers map[int64]map[chan struct{}]struct{} // by run
	threads  map[int64]map[chan struct{}]struct{} // by thread (WatchThread)

	queueMu sync.Mutex
	queued  map[int64]bool // owners to kick
	queueC  chan struct{}
}

func newNotes() *notes {
	return &notes{watchers: map[int64]map[chan struct{}]struct{}{}, threads: map[int64]map[chan struct{}]struct{}{},
		queued: map[int64]bool{}, queueC: make(chan struct{}, 1)}
}

// watch returns a channel that receives (coalesced) when a note about run
// arrives, and the function that stops watching.
func (n *notes) watch(run int64) (<-chan struct{}, func()) {
	return n.add(n.watchers, run)
}

// add registers a watcher of id in set (guarded by mu).
func (n *notes) add(set map[int64]map[chan struct{}]struct{}, id int64) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if set[id] == nil {
		set[id] = map[chan struct{}]struct{}{}
	}
	set[id][ch] = struct{}{}
	n.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			delete(set[id], ch)
			if len(set[id]) == 0 {
				delete(set, id)
			}
		})
	}
}

// wake tells run's watchers (every run's: all).
func (n *notes) wake(run int64, all bool) { n.signal(n.watchers, run, all) }

// wakeThread tells thread's watchers (every thread's: all).
func (n *notes) wakeThread(thread int64, all bool) { n.signal(n.threads, thread, all) }

// signal wakes the watchers of id in set (all: of every id) without ever
// blocking: a watcher that has not taken its last wake yet keeps that one.
func (n *notes) signal(set map[int64]map[chan struct{}]struct{}, id int64, all bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	wakeAll := func(ws map[chan struct{}]struct{}) {
		for ch := range ws {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	if !all {
		wakeAll(set[id])
		return
	}
	for _, ws := range set {
		wakeAll(ws)
	}
}

// WatchThread returns a channel that receives when thread's messages may
// have changed or, of a room's thread, the room's members, agents or
// settings (db.NoteThreadChanged, from any instance), and after every
// reconnection of the listener (notes may have been lost meanwhile). Wakes
// coalesce: however many notes arrive before the watcher reads the
// channel, it receives once, and then reads the state anew. stop ends the
// watch (safe to call more than once).
func (rt *Runtime) WatchThread(thread int64) (<-chan struct{}, func()) {
	return rt.notes.add(rt.notes.threads, thread)
}

// listen runs the runtime's listener until the runtime ends.
func (rt *Runtime) listen() {
	defer rt.wg.Done()
	rt.wg.Add(1)
	go rt.kickNoted()
	rt.store.Listen(rt.ctx, rt.connected, rt.note)
}

// connected catches up after a (re)connection: notes may have been lost.
func (rt *Runtime) connected() {
	rt.notes.wake(0, true)
	rt.notes.wakeThread(0, true)
	rt.progress.wake()
	rt.noteQueued(0)
	if rt.pulls != nil {
		rt.pulls.connected()
	}
}

// note takes one note; it runs on the listener's goroutine and never
// waits for the database.
func (rt *Runtime) note(n db.Note) {
	switch n.Kind {
	case db.NoteProgress, db.NoteStarted, db.NoteEnd:
		rt.notes.wake(n.ID, false)
	case db.NoteStop:
		if lr := rt.liveRun(n.ID); lr != nil {
			lr.stop(StopUser)
		}
		rt.notes.wake(n.ID, false)
	case db.NoteStepped:
		// A step added from outside the run (a /steer, on any instance):
		// its watchers here read the steps now.
		if lr := rt.liveRun(n.ID); lr != nil {
			lr.stepped()
		}
		rt.notes.wake(n.ID, false)
	case db.NoteFollow:
		rt.progress.follow(n.ID, time.Now().Add(followTTL))
	case db.NoteQueued:
		rt.noteQueued(n.ID)
	case db.NoteThread:
		rt.notes.wakeThread(n.ID, false)
	case db.NotePull, db.NotePullEnd, db.NotePullStop:
		// A model pull changed or was asked to stop (issue 18).
		if rt.pulls != nil {
			rt.pulls.note(n)
		}
	}
}

func (rt *Runtime) liveRun(id int64) *liveRun {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.live[id]
}

// noteQueued asks kickNoted to try owner's queued runs (0: everyone's).
func (rt *Runtime) noteQueued(owner int64) {
	n := rt.notes
	n.queueMu.Lock()
	n.queued[owner] = true
	n.queueMu.Unlock()
	select {
	case n.queueC <- struct{}{}:
	default:
	}
}

// kickNoted claims the queued runs notes told of, off the listener's
// goroutine, each owner once however many notes came meanwhile.
func (rt *Runtime) kickNoted() {
	defer rt.wg.Done()
	n := rt.notes
	for {
		select {
		case <-rt.ctx.Done():
			return
		case <-n.queueC:
		}
		n.queueMu.Lock()
		owners := n.queued
		n.queued = map[int64]bool{}
		n.queueMu.Unlock()
		if owners[0] {
			owners = map[int64]bool{0: true}
		}
		for owner := range owners {
			ctx, cancel := context.WithTimeout(rt.ctx, 10*time.Second)
			rt.kickQueued(ctx, owner)
			cancel()
		}
	}
}

// tellFollowing tells the instance running run that it is followed from
// here (best effort: without it the text comes at FlushEvery).
func (rt *Runtime) tellFollowing(ctx context.Context, run int64) {
	if err := rt.store.Notify(ctx, db.NoteFollow, run); err != nil {
		slog.Debug("notify following", "run", run, "err", err)
	}
}
