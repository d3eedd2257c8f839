package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"weft/views"
)

// streamResult is what the client saw of one concurrent stream.
type streamResult struct {
	err        error
	tokens     int
	late       int // tokens first seen in a snapshot (joined late)
	reconnects int
	maxGap     time.Duration
	started    time.Time // POST sent
	opened     time.Time // run id known (thread page loaded), event stream about to open
	firstDelta time.Time
	ended      time.Time
	delays     []int64 // per token that arrived in a delta: arrival − emission (ns)
	lateDelays []int64 // the same for tokens first seen in a snapshot
	emits      []int64 // emission times of the same tokens
}

// concurrent runs the sweep of concurrent streams.
func (b *bench) concurrent(ctx context.Context) error {
	r := b.r
	r.section(fmt.Sprintf("3. concurrent streams (%d tokens/s each for %s, started evenly over %s)", b.cfg.rate, b.cfg.duration, b.cfg.ramp))
	r.printf("Each stream is a new thread (POST /t, thread page, event stream) of one of N/%d users. The fake waits %s before each",
		b.cfg.perUser, time.Second/time.Duration(b.cfg.rate))
	r.printf("chunk; every chunk carries the time the model wrote it to weft; added delay = arrival at the client − that time, for every")
	r.printf("token received; \"late join\" tokens came in the snapshot when the stream connected (they waited for the page and the")
	r.printf("connection). Streams not done ramp + 2×duration + 1 min after the first POST are cut and count as failed.")
	r.printf("\"all-running\" = tokens emitted while every stream was open (after the last first delta, before the first done).")
	for _, n := range b.cfg.streams {
		if err := b.concurrentOne(ctx, n); err != nil {
			return fmt.Errorf("%d streams: %w", n, err)
		}
		if !b.e.weftAlive() {
			return errors.New("weft died")
		}
	}
	return nil
}

// concurrentOne starts n streams over the ramp, reads them all to the end
// and reports delays, CPU and memory.
func (b *bench) concurrentOne(ctx context.Context, n int) error {
	r, e := b.r, b.e
	users := (n + b.cfg.perUser - 1) / b.cfg.perUser
	ps, err := b.people(ctx, b.nextPerson+users)
	if err != nil {
		return err
	}
	ps = ps[b.nextPerson:]
	b.nextPerson += users
	e.settle(0, 30*time.Second)
	tokens := int(b.cfg.duration.Seconds() * float64(b.cfg.rate))
	sp := spec{n: tokens, delay: time.Second / time.Duration(b.cfg.rate), stamp: true}
	msg := sp.message("concurrent")

	pid := e.pid()
	resetHWM(pid)
	rssBefore, _ := memKB(pid)
	m := e.mark()
	wal0 := e.walBytes(ctx)
	streams0 := e.streams.Load()
	smp := e.sample(100 * time.Millisecond)

	pctx, cancel := context.WithTimeout(ctx, b.cfg.ramp+2*b.cfg.duration+time.Minute)
	defer cancel()
	results := make([]streamResult, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64) // POSTs and page loads in flight
	t0 := time.Now()
	var mid map[string]float64
	var midDB string
	var midLive int
	var midOnce sync.Once
	var profErr error
	b.startProfile(ctx, "concurrent-"+strconv.Itoa(n))
	takeMid := func() {
		midOnce.Do(func() {
			midLive = e.fake.ActiveStreams()
			mid = e.goMetrics(pctx)
			midDB = e.pgActivity(pctx)
			profErr = b.heapProfile(pctx, strconv.Itoa(n))
			if profErr == nil && e.pprofURL != "" {
				profErr = b.pprofGet(pctx, "/debug/pprof/goroutine?debug=1", filepath.Join(b.cfg.profileDir, "goroutines-"+strconv.Itoa(n)+".txt"))
			}
		})
	}
	for i := range n {
		at := t0.Add(time.Duration(int64(b.cfg.ramp) * int64(i) / int64(n)))
		select {
		case <-time.After(time.Until(at)):
		case <-pctx.Done():
			return pctx.Err()
		}
		p := ps[i%len(ps)]
		wg.Go(func() { results[i] = b.oneStream(pctx, p, msg, sem) })
	}
	rampDone := time.Since(t0)
	// Look inside weft on the plateau: a third of a stream length after
	// the scheduled end of the ramp.
	allDone := make(chan struct{})
	go func() {
		select {
		case <-time.After(time.Until(t0.Add(b.cfg.ramp + b.cfg.duration/3))):
			takeMid()
		case <-allDone:
		}
	}()
	wg.Wait()
	wall := time.Since(t0)
	close(allDone)
	if ctx.Err() != nil { // interrupted: no report
		midOnce.Do(func() {})
		b.stopProfile(context.Background())
		_, _ = smp.finish()
		return ctx.Err()
	}
	midOnce.Do(func() {}) // no late scrape once everything ended
	b.stopProfile(ctx)
	maxRSS, maxLive := smp.finish()
	_, hwm := memKB(pid)
	cpu := cpuSeconds(pid) - m.weft
	load := e.since(m)
	wal := e.walBytes(ctx) - wal0

	// Aggregate.
	var all, steady, everything dist
	var failed, incomplete, late, reconnects, totalTokens int
	var lastFirst, firstEnd, lastOpen time.Time
	var setup dist
	var maxGap time.Duration
	var errs []string
	for _, res := range results {
		if res.err != nil {
			failed++
			if len(errs) < 5 {
				errs = append(errs, res.err.Error())
			}
		} else if res.tokens != tokens {
			incomplete++
		}
		totalTokens += res.tokens
		if !res.opened.IsZero() {
			setup = append(setup, int64(res.opened.Sub(res.started)))
			if res.opened.After(lastOpen) {
				lastOpen = res.opened
			}
		}
		late += res.late
		reconnects += res.reconnects
		maxGap = max(maxGap, res.maxGap)
		if res.firstDelta.After(lastFirst) {
			lastFirst = res.firstDelta
		}
		if !res.ended.IsZero() && (firstEnd.IsZero() || res.ended.Before(firstEnd)) {
			firstEnd = res.ended
		}
		all = append(all, res.delays...)
		everything = append(everything, res.delays...)
		everything = append(everything, res.lateDelays...)
	}
	lo, hi := lastFirst.UnixNano(), firstEnd.UnixNano()
	var ramping, ending dist
	for _, res := range results {
		for j, em := range res.emits {
			switch {
			case em < lo:
				ramping = append(ramping, res.delays[j])
			case em > hi:
				ending = append(ending, res.delays[j])
			default:
				steady = append(steady, res.delays[j])
			}
		}
	}
	settled := e.settle(streams0+int64(n), 60*time.Second)
	time.Sleep(2 * time.Second)
	rssAfter, _ := memKB(pid)

	r.printf("\n-- %d streams (%d users, %d tokens each)", n, users, tokens)
	r.printf("ramp: scheduled %s, last POST sent after %s, last thread page loaded after %s; all done after %s; peak concurrent model streams %d",
		b.cfg.ramp, rampDone.Round(time.Millisecond), lastOpen.Sub(t0).Round(time.Millisecond), wall.Round(time.Millisecond), maxLive)
	r.printf("start of a stream (POST /t + 303 + thread page): %s", setup.summary())
	if hi > lo {
		r.printf("all-running window: %s", time.Duration(hi-lo).Round(time.Millisecond))
	} else {
		r.printf("all-running window: none (the first stream ended before the last one had its first delta)")
	}
	r.printf("streams: %d ok, %d failed, %d incomplete; tokens received %d of %d; late-join tokens %d; reconnections %d; longest gap between events %s",
		n-failed-incomplete, failed, incomplete, totalTokens, n*tokens, late, reconnects, maxGap.Round(time.Millisecond))
	for _, s := range errs {
		r.printf("  error: %s", s)
	}
	r.printf("added delay, every token:        %s", everything.summary())
	r.printf("added delay, all delta tokens:   %s", all.summary())
	r.printf("added delay, all-running window: %s", steady.summary())
	r.printf("added delay, before it (ramp):   %s", ramping.summary())
	r.printf("added delay, after it (endings): %s", ending.summary())
	r.printf("weft CPU %.2f s over %s = %.2f cores; %.1f µs per token relayed (all-in: sign-in pages, posts, queries, flushes, renders)",
		cpu, wall.Round(time.Millisecond), cpu/wall.Seconds(), cpu/float64(max(totalTokens, 1))*1e6)
	r.printf("%s", load)
	r.printf("weft RSS: before %s, peak %s (sampled every 100 ms), VmHWM %s, 2 s after the last answer %s (settled: %v)",
		mb(rssBefore), mb(maxRSS), mb(hwm), mb(rssAfter), settled)
	if mid != nil {
		r.printf("on the plateau: %d model streams live; database sessions: %s", midLive, midDB)
		r.printf("weft /metrics on the plateau: goroutines %.0f, heap in use %.0f MB, heap sys %.0f MB, heap released %.0f MB, next GC %.0f MB, open fds %.0f",
			mid["go_goroutines"], mid["go_memstats_heap_inuse_bytes"]/(1<<20), mid["go_memstats_heap_sys_bytes"]/(1<<20),
			mid["go_memstats_heap_released_bytes"]/(1<<20), mid["go_memstats_next_gc_bytes"]/(1<<20), mid["process_open_fds"])
	}
	if profErr != nil {
		r.printf("profile: %v", profErr)
	}
	r.printf("postgres WAL: %.1f MB (%.1f× the answer text)", float64(wal)/(1<<20), float64(wal)/float64(max(totalTokens, 1)*22))
	sorted := everything.sorted()
	p99 := sorted.pct(0.99)
	if n == 1000 {
		r.printf("budget: 1,000 streams at 20 tok/s, p99 added delay < 100 ms → %s (%s); RSS < 512 MB → %s (peak %s)",
			verdict(p99 < 100*time.Millisecond && failed+incomplete == 0), strings.TrimSpace(ms(p99)), verdict(hwm < 512*1024), mb(hwm))
	}
	b.conc = append(b.conc, concSummary{n: n, p50: sorted.pct(0.5), p99: p99, hwm: hwm, cpuPerTokUS: cpu / float64(max(totalTokens, 1)) * 1e6,
		cores: cpu / wall.Seconds(), failed: failed + incomplete, peak: maxLive})
	return nil
}

// concSummary is one step of the sweep, for the summary.
type concSummary struct {
	n           int
	p50, p99    time.Duration
	hwm         int64
	cpuPerTokUS float64
	cores       float64
	failed      int
	peak        int
}

// oneStream starts a thread like a browser and reads its stream to done,
// timing every stamped token.
func (b *bench) oneStream(ctx context.Context, p *person, msg string, sem chan struct{}) (res streamResult) {
	res.started = time.Now()
	sem <- struct{}{}
	_, run, err := p.newThread(ctx, msg)
	<-sem
	if err != nil {
		res.err = err
		return res
	}
	res.opened = time.Now()
	done := false
	last := time.Now()
	for attempt := 0; !done; attempt++ {
		if attempt > 5 {
			res.err = fmt.Errorf("run %d: no done event after %d reconnections", run, attempt-1)
			return res
		}
		if attempt > 0 {
			res.reconnects++
		}
		_, err := p.stream(ctx, run, func(ev event) {
			res.maxGap = max(res.maxGap, ev.at.Sub(last))
			last = ev.at
			at := ev.at.UnixNano()
			switch ev.name {
			case views.EventSnapshot:
				k := 0
				stamps(ev.data, func(t int64) {
					k++
					if k > res.tokens { // first seen here: it joined late
						res.lateDelays = append(res.lateDelays, at-t)
					}
				})
				if k > res.tokens {
					res.late += k - res.tokens
					res.tokens = k
				}
			case views.EventDelta:
				if res.firstDelta.IsZero() {
					res.firstDelta = ev.at
				}
				stamps(ev.data, func(t int64) {
					res.tokens++
					res.delays = append(res.delays, at-t)
					res.emits = append(res.emits, t)
				})
			case views.EventDone:
				done = true
				res.ended = ev.at
			}
		})
		if err != nil && !errors.Is(err, errNoDone) {
			res.err = fmt.Errorf("run %d: %w", run, err)
			return res
		}
	}
	return res
}

// startProfile starts a CPU profile of weft into the results folder (only
