package handlers

import (
	"context"
	"errors"
	goruntime "runtime"
	"sync/atomic"
	"time"
)

// errHashBusy is returned when every hashing slot stayed taken for the
// whole queue wait: the request is refused with a 503 instead of piling up
// 19 MiB argon2id computations without bound.
var errHashBusy = errors.New("password hashing: all slots busy")

const msgHashBusy = "The server is busy. Wait a moment and try again."

// hashPool bounds how many argon2id computations run at once (each takes
// argonMemory KiB and a core for tens of milliseconds). Every password hash
// and check goes through it: register, login and any password change.
type hashPool struct {
	slots chan struct{}
	wait  time.Duration

	done, running, peak atomic.Int64 // for tests: work done and its concurrency
}

// newHashPool makes a pool of n slots (GOMAXPROCS, at least 2, when n ≤ 0)
// whose callers queue for at most wait (5 s when 0).
func newHashPool(n int, wait time.Duration) *hashPool {
	if n <= 0 {
		n = max(2, goruntime.GOMAXPROCS(0))
	}
	if wait <= 0 {
		wait = 5 * time.Second
	}
	return &hashPool{slots: make(chan struct{}, n), wait: wait}
}

func (p *hashPool) do(ctx context.Context, f func()) error {
	select {
	case p.slots <- struct{}{}: // a free slot is taken even when wait is tiny
	default:
		t := time.NewTimer(p.wait)
		defer t.Stop()
		select {
		case p.slots <- struct{}{}:
		case <-t.C:
			return errHashBusy
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() { <-p.slots }()
	n := p.running.Add(1)
	for old := p.peak.Load(); n > old && !p.peak.CompareAndSwap(old, n); old = p.peak.Load() {
	}
	defer p.running.Add(-1)
	p.done.Add(1)
	f()
	return nil
}

// hash is hashPassword inside a slot.
func (p *hashPool) hash(ctx context.Context, pw string) (h string, err error) {
	if perr := p.do(ctx, func() { h, err = hashPassword(pw) }); perr != nil {
		return "", perr
	}
	return h, err
}

// check is checkPassword inside a slot.
func (p *hashPool) check(ctx context.Context, hash, pw string) (ok bool, err error) {
	if perr := p.do(ctx, func() { ok, err = checkPassword(hash, pw) }); perr != nil {
		return false, perr
	}
	return ok, err
}
