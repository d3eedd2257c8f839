package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// idle reads weft's RSS after start-up, after a little use, and after it
// has sat idle (DESIGN §13: idle server memory).
func (b *bench) idle(ctx context.Context) error {
	r, e := b.r, b.e
	r.section("4. idle RSS of weft")
	pid := e.pid()
	time.Sleep(2 * time.Second)
	rss0, hwm0 := memKB(pid)
	r.printf("%-45s VmRSS %s  VmHWM %s  (%s)", "after start-up (migrated, ready, 2 s later):", mb(rss0), mb(hwm0), memDetail(pid))

	ps, err := b.people(ctx, 1)
	if err != nil {
		return err
	}
	p := ps[0]
	b.nextPerson = max(b.nextPerson, 1)
	loads := 0
	for range 5 {
		if _, _, err := p.do(ctx, http.MethodGet, "/", nil, false); err != nil {
			return err
		}
		loads++
	}
	th, run, err := p.newThread(ctx, spec{n: 20}.message("idle"))
	if fe := (*finishedError)(nil); errors.As(err, &fe) {
		err = nil // answered before the page rendered: fine here
	}
	if err != nil {
		return err
	}
	if run != 0 {
		if _, err := p.stream(ctx, run, func(event) {}); err != nil {
			return err
		}
	}
	for range 5 {
		if _, _, err := p.do(ctx, http.MethodGet, fmt.Sprintf("/t/%d", th), nil, false); err != nil {
			return err
		}
		loads++
	}
	e.settle(1, 10*time.Second)
	rss1, hwm1 := memKB(pid)
	r.printf("%-45s VmRSS %s  VmHWM %s", fmt.Sprintf("after 1 sign-up, %d page loads, 1 answer:", loads), mb(rss1), mb(hwm1))
	select {
	case <-time.After(b.cfg.idleWait):
	case <-ctx.Done():
		return ctx.Err()
	}
	rss2, _ := memKB(pid)
	m := e.goMetrics(ctx)
	r.printf("%-45s VmRSS %s  (%s)", b.cfg.idleWait.String()+" later (idle):", mb(rss2), memDetail(pid))
	r.printf("    Go heap in use %.1f MB, heap sys %.1f MB, released %.1f MB, goroutines %.0f",
		m["go_memstats_heap_inuse_bytes"]/(1<<20), m["go_memstats_heap_sys_bytes"]/(1<<20),
		m["go_memstats_heap_released_bytes"]/(1<<20), m["go_goroutines"])
	r.printf("budget: idle RSS < 60 MB → %s", verdict(float64(rss2) < 60*1024))
	b.idleRSS = rss2
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "MET"
	}
	return "MISSED"
}
