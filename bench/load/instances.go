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

// instances measures two weft processes on one database (issue 15): an
// answer running on the first is followed on the second (how long after
// the model emitted a token it reaches a stream on the second, next to a
// stream on the first), and Stop pressed on the second reaches the model
// the first is reading.
func (b *bench) instances(ctx context.Context) error {
	r := b.r
	r.section("6. two instances on one database: follow and Stop across them (LISTEN/NOTIFY)")
	bin := b.bin
	second, err := b.e.launchWeft(ctx, bin, "bench-2", b.cfg.weftEnv, false)
	if err != nil {
		return fmt.Errorf("start the second weft: %w", err)
	}
	r.printf("a second weft (WEFT_INSTANCE_ID=bench-2) at %s on the same database. Each answer is sent to the first", second.base)
	r.printf("(POST /t, page) and streamed at once from both (GET /runs/{id}/events on each, one cookie jar).")
	r.printf("delay = token first shown on the client − the model writing that chunk (t= stamp), as in section 3, for the tokens")
	r.printf("that came in deltas or later snapshots (not those of the snapshot the stream opened with, nor those only in done).")
	variants := []struct {
		name    string
		answers int
		conc    int
	}{
		{"1 answer at a time", 10, 1},
		{"20 answers at once", 20, 20},
	}
	sp := spec{n: 100, delay: 20 * time.Millisecond, stamp: true} // 50 tokens/s for 2 s
	for _, v := range variants {
		ps, err := b.people(ctx, b.nextPerson+v.conc)
		if err != nil {
			return err
		}
		ps = ps[b.nextPerson:]
		b.nextPerson += v.conc
		m := b.e.mark()
		var mu sync.Mutex
		var onFirst, onSecond dist
		var firstErr error
		var wg sync.WaitGroup
		for w := range v.conc {
			p := ps[w]
			there := &person{base: second.base, email: p.email, hc: p.hc, wsID: p.wsID}
			wg.Go(func() {
				for i := w; i < v.answers; i += v.conc {
					a, c, err := b.followedAnswer(ctx, p, there, sp)
					mu.Lock()
					onFirst, onSecond = append(onFirst, a...), append(onSecond, c...)
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					if err != nil {
						return
					}
				}
			})
		}
		wg.Wait()
		if firstErr != nil {
			return firstErr
		}
		r.printf("\n-- %s: %d answers of %d tokens at 50 tok/s", v.name, v.answers, sp.n)
		r.printf("delay on the instance running it:     %s", onFirst.summary())
		r.printf("delay on the other instance:          %s", onSecond.summary())
		r.printf("  %s", b.e.since(m))
		if v.conc == 1 && len(onSecond) > 0 {
			b.crossP50, b.crossP99 = onSecond.sorted().pct(0.5), onSecond.sorted().pct(0.99)
		}
		if v.conc > 1 && len(onSecond) > 0 {
			b.crossConcP99 = onSecond.sorted().pct(0.99)
		}
	}

	// Stop on the second while the first runs the answer.
	ps, err := b.people(ctx, b.nextPerson+1)
	if err != nil {
		return err
	}
	p := ps[b.nextPerson]
	b.nextPerson++
	there := &person{base: second.base, email: p.email, hc: p.hc, wsID: p.wsID}
	var stops, ends dist
	for range 20 {
		s, e, err := b.stopAcross(ctx, p, there)
		if err != nil {
			return err
		}
		stops, ends = append(stops, int64(s)), append(ends, int64(e))
	}
	r.printf("\n-- Stop on the other instance (POST /runs/{id}/cancel there), 20 answers")
	r.printf("POST sent → the model's request cancelled (seen by the fake): %s", stops.summary())
	r.printf("POST sent → done on the other instance's stream:           %s", ends.summary())
	b.stopP99 = stops.sorted().pct(0.99)
	r.printf("\nbudget: cross-instance delta p99 < 50 ms (1 at a time) → %s (p50 %s, p99 %s); Stop across instances < 1 s → %s (p99 %s)",
		verdict(b.crossP99 > 0 && b.crossP99 < 50*time.Millisecond), strings.TrimSpace(ms(b.crossP50)), strings.TrimSpace(ms(b.crossP99)),
		verdict(b.stopP99 < time.Second), strings.TrimSpace(ms(b.stopP99)))
	return nil
}

// followedAnswer sends one answer to here and streams it from here and
// from there, returning each token's delay on both.
func (b *bench) followedAnswer(ctx context.Context, here, there *person, sp spec) (onHere, onThere dist, err error) {
	_, run, err := here.newThread(ctx, sp.message("instances"))
	if err != nil {
		return nil, nil, err
	}
	collect := func(p *person, out *dist) error {
		var streamErr error
		seen := map[int64]bool{}
		for range 3 { // a stream cut before done reconnects, as htmx does
			opened := false
			_, streamErr = p.stream(ctx, run, func(ev event) {
				if ev.name != views.EventDelta && ev.name != views.EventSnapshot {
					return
				}
				// Each token when it first shows, in a delta or a later
				// snapshot (weft before issue 15 sent a follower on another
				// instance snapshots only); not the tokens of the snapshot
				// the stream opens with, late by the page's time (section 1).
				first := ev.name == views.EventSnapshot && !opened
				opened = true
				stamps(ev.data, func(t int64) {
					if !seen[t] {
						seen[t] = true
						if !first {
							*out = append(*out, ev.at.UnixNano()-t)
						}
					}
				})
			})
			if !errors.Is(streamErr, errNoDone) {
				break
			}
		}
		return streamErr
	}
	var wg sync.WaitGroup
	var errHere error
	wg.Go(func() { errHere = collect(here, &onHere) })
	errThere := collect(there, &onThere)
	wg.Wait()
	return onHere, onThere, cmp.Or(errHere, errThere)
}

// stopAcross starts a held answer on here, waits until there streams its
// first token, presses Stop there, and returns how long until the fake saw
// the model request cancelled and until there's stream ended.
func (b *bench) stopAcross(ctx context.Context, here, there *person) (cancelled, ended time.Duration, err error) {
	before := b.e.fake.Cancellations()
	_, run, err := here.newThread(ctx, spec{n: 1, stamp: true, hang: true}.message("stop"))
	if err != nil {
		return 0, 0, err
	}
	first := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	var endAt time.Time
	go func() {
		_, err := there.stream(ctx, run, func(ev event) {
			if ev.name == views.EventDelta || ev.name == views.EventSnapshot {
				if strings.Contains(ev.data, "t=") {
					once.Do(func() { close(first) })
				}
			}
			if ev.name == views.EventDone {
				endAt = ev.at
			}
		})
		done <- err
	}()
	select {
	case <-first:
	case err := <-done:
		return 0, 0, fmt.Errorf("the stream on the other instance ended before the first token: %v", err)
	case <-time.After(30 * time.Second):
		return 0, 0, errors.New("no first token on the other instance within 30 s")
	}
	start := time.Now()
	if err := there.cancel(ctx, run); err != nil {
		return 0, 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.e.fake.WaitCancelled(wctx, before+1); err != nil {
		return 0, 0, fmt.Errorf("Stop on the other instance did not reach the model within 10 s: %w", err)
	}
	cancelled = time.Since(start)
	select {
	case err := <-done:
		if err != nil {
			return 0, 0, err
		}
	case <-wctx.Done():
		return 0, 0, errors.New("the other instance's stream did not end within 10 s of Stop")
	}
	return cancelled, endAt.Sub(start), nil
}
