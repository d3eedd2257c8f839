package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"weft/views"
)

// firstToken is one send's first-token measurement.
type firstToken struct {
	added, pre, relay time.Duration
	// Client-side milestones from the POST: its answer (for a new thread,
	// through the thread page) and the first event of the stream.
	posted, firstEvent time.Duration
	newThread          bool
	carrier            string // the event that brought the first token
}

// latency measures the added time from sending a message to its first
// token on the event stream, for an instant and a slower model.
func (b *bench) latency(ctx context.Context) error {
	r := b.r
	r.section("1. added first-token latency (POST sent → first answer text on the event stream, minus the model's own time to its first token)")
	r.printf("Each send is what a browser does: POST, then (new thread) GET of the thread page the 303 points to, then GET /runs/{id}/events.")
	r.printf("Opening the event stream after the POST is inside the measurement. Every 5th send starts a new thread (POST /t, 303, page),")
	r.printf("the others append with htmx (POST /t/{id}/messages, fragments). Model time = (fake's first chunk passed on) − (model request arrived),")
	r.printf("both stamped in the chunk text by the fake (or the proxy, -proxy); it is subtracted. pre = POST sent → model request arrived;")
	r.printf("relay = first chunk passed on → on the client.")
	variants := []struct {
		name string
		sp   spec
		conc int
	}{
		{"instant model (first chunk at once, then the model keeps the run open; Stop ends it), 1 at a time", spec{n: 1, stamp: true, hang: true}, 1},
		{fmt.Sprintf("instant model, %d at a time (one user each)", b.cfg.latencyConc), spec{n: 1, stamp: true, hang: true}, b.cfg.latencyConc},
		{"model with 50 ms before each of 3 chunks (first token at 50 ms), 1 at a time", spec{n: 3, delay: 50 * time.Millisecond, stamp: true}, 1},
	}
	for vi, v := range variants {
		b.startProfile(ctx, fmt.Sprintf("latency-%d", vi+1))
		m := b.e.mark()
		samples, err := b.latencyRun(ctx, v.sp, b.cfg.latencySends, v.conc)
		load := b.e.since(m)
		b.stopProfile(ctx)
		if err != nil {
			return fmt.Errorf("latency (%s): %w", v.name, err)
		}
		r.printf("\n-- %s: %d sends", v.name, len(samples))
		var all, allNew, allApp, pre, relay, posted, firstEv dist
		carriers := map[string]int{}
		for _, s := range samples {
			all = append(all, int64(s.added))
			pre = append(pre, int64(s.pre))
			relay = append(relay, int64(s.relay))
			posted = append(posted, int64(s.posted))
			firstEv = append(firstEv, int64(s.firstEvent))
			if s.newThread {
				allNew = append(allNew, int64(s.added))
			} else {
				allApp = append(allApp, int64(s.added))
			}
			carriers[s.carrier]++
		}
		r.printf("added, all sends:     %s", all.summary())
		r.printf("added, new thread:    %s", allNew.summary())
		r.printf("added, append (htmx): %s", allApp.summary())
		r.printf("  client: POST answered (new thread: + page): %s", posted.summary())
		r.printf("  client: first event on the stream:          %s", firstEv.summary())
		r.printf("  pre (POST → model request): %s", pre.summary())
		r.printf("  relay (chunk → client):     %s", relay.summary())
		r.printf("  first token arrived in: %v", carriers)
		r.printf("  %s", load)
		if v.conc == 1 && v.sp.delay == 0 {
			b.firstTokenP50 = all.sorted().pct(0.5)
		}
		if v.conc > 1 && v.sp.delay == 0 {
			b.firstTokenConcP50 = all.sorted().pct(0.5)
		}
	}
	r.printf("\nbudget: added first-token latency p50 < 15 ms → instant model, 1 at a time: %s (p50 %s); %d at a time: %s (p50 %s)",
		verdict(b.firstTokenP50 < 15*time.Millisecond), strings.TrimSpace(ms(b.firstTokenP50)),
		b.cfg.latencyConc, verdict(b.firstTokenConcP50 < 15*time.Millisecond), strings.TrimSpace(ms(b.firstTokenConcP50)))
	return nil
}

// latencyRun makes sends with conc senders, each a fresh user.
func (b *bench) latencyRun(ctx context.Context, sp spec, sends, conc int) ([]firstToken, error) {
	ps, err := b.people(ctx, b.nextPerson+conc)
	if err != nil {
		return nil, err
	}
	ps = ps[b.nextPerson:] // fresh users: short sidebars, no queued runs
	b.nextPerson += conc
	var mu sync.Mutex
	var out []firstToken
	var firstErr error
	var wg sync.WaitGroup
	for w := range conc {
		share := sends / conc
		if w < sends%conc {
			share++
		}
		p := ps[w]
		wg.Go(func() {
			var thread int64
			for i := range share {
				s, th, err := b.oneFirstToken(ctx, p, sp, thread, i%5 == 0)
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					return
				}
				thread = th
				mu.Lock()
				out = append(out, s)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.e.settle(0, 10*time.Second)
	return out, firstErr
}

// oneFirstToken sends one message (a new thread when fresh) and times its
// first token; it returns the thread for the next send.
func (b *bench) oneFirstToken(ctx context.Context, p *person, sp spec, thread int64, fresh bool) (firstToken, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res := firstToken{newThread: fresh || thread == 0}
	msg := sp.message("latency")
	t0 := time.Now()
	var run int64
	var err error
	if res.newThread {
		thread, run, err = p.newThread(ctx, msg)
	} else {
		run, err = p.appendMessage(ctx, thread, msg)
	}
	if fe := (*finishedError)(nil); errors.As(err, &fe) {
		// The answer was complete before its thread page rendered: the
		// first token reached the browser with the page.
		at := time.Now()
		res.posted, res.firstEvent = at.Sub(t0), at.Sub(t0)
		var emit int64
		recv := stamps(fe.page, func(t int64) {
			if emit == 0 {
				emit = t
			}
		})
		if emit == 0 || recv == 0 {
			return res, fe.thread, fmt.Errorf("%w, and it has no stamped text", err)
		}
		res.added = time.Duration(at.UnixNano() - t0.UnixNano() - (emit - recv))
		res.pre = time.Duration(recv - t0.UnixNano())
		res.relay = time.Duration(at.UnixNano() - emit)
		res.carrier = "page"
		return res, fe.thread, nil
	}
	if err != nil {
		return res, thread, err
	}
	res.posted = time.Since(t0)
	got := false
	var stopErr chan error
	_, err = p.stream(ctx, run, func(ev event) {
		if res.firstEvent == 0 {
			res.firstEvent = ev.at.Sub(t0)
		}
		if got || (ev.name != views.EventSnapshot && ev.name != views.EventDelta && ev.name != views.EventDone) {
			return
		}
		var emit int64
		recv := stamps(ev.data, func(t int64) {
			if emit == 0 {
				emit = t
			}
		})
		if emit == 0 || recv == 0 {
			return
		}
		got = true
		at := ev.at.UnixNano()
		model := emit - recv
		res.added = time.Duration(at - t0.UnixNano() - model)
		res.pre = time.Duration(recv - t0.UnixNano())
		res.relay = time.Duration(at - emit)
		res.carrier = ev.name
		if sp.hang {
			stopErr = make(chan error, 1)
			go func() { stopErr <- p.cancel(ctx, run) }()
		}
	})
	if err != nil {
		return res, thread, fmt.Errorf("run %d: %w", run, err)
	}
	if stopErr != nil {
		if err := <-stopErr; err != nil {
			return res, thread, err
		}
	}
	if !got {
		return res, thread, fmt.Errorf("run %d: no stamped answer text on the stream", run)
	}
	return res, thread, nil
}
