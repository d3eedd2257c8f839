package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"weft/views"
)

// relayBatch is K answers of n tokens, delay before each chunk.
type relayBatch struct {
	n       int
	delay   time.Duration
	answers int
}

// relay measures weft's CPU per relayed token and the bytes on the wire
// per answer byte, for several answer lengths, with an instant and a paced
// model.
func (b *bench) relay(ctx context.Context) error {
	r, e := b.r, b.e
	r.section("2. relay cost per token and bytes on the wire")
	r.printf("Answers are appended (htmx) to a thread made for each batch; the client opens the event stream right after the POST and")
	r.printf("reads it to the done event, checking that snapshot + deltas rebuild the answer exactly. CPU = weft's utime+stime over the")
	r.printf("batch (10 ms ticks) divided by tokens: it includes the POST, the run's queries, the flushes and the final render, so it is")
	r.printf("an upper bound of the relay cost. \"paced 1ms\" makes the fake wait 1 ms before each chunk, so most tokens travel alone.")
	r.printf("wire/answer = event-stream body bytes received ÷ answer text bytes (the done event repeats the whole answer as HTML).")
	r.printf("WAL/answer = PostgreSQL WAL bytes written during the batch ÷ answer bytes.")
	r.printf("")
	r.printf("%-6s %-10s %3s  %10s %9s %8s %9s %9s %10s %9s %9s %6s", "tokens", "model", "K", "answer B", "wire B", "wire/ans", "events", "CPU/ans", "CPU/token", "pgCPU/ans", "WAL/ans", "reconn")
	batches := []relayBatch{
		{2000, 0, b.cfg.relayAnswers}, {2000, time.Millisecond, 3},
		{100, 0, 10}, {1000, 0, 5}, {10000, 0, 3},
		{100, time.Millisecond, 5}, {1000, time.Millisecond, 3}, {10000, time.Millisecond, 1},
		{20000, time.Millisecond, 1},    // the database's cost of one long answer (issue 15)
		{500, 20 * time.Millisecond, 1}, // a model at 50 tokens/s: every token alone (issue 15)
	}
	ps, err := b.people(ctx, b.nextPerson+1)
	if err != nil {
		return err
	}
	p := ps[b.nextPerson]
	b.nextPerson++
	type key struct {
		n     int
		paced bool
	}
	cpuPerAnswer := map[key]float64{}
	long := ""
	m := e.mark()
	for _, bt := range batches {
		// A thread for the batch, its first (tiny) answer and title done.
		th, run, err := p.newThread(ctx, spec{n: 1}.message("relay-setup"))
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
		e.settle(0, 10*time.Second)
		wal0 := e.walBytes(ctx)
		b.startProfile(ctx, fmt.Sprintf("relay-%d-%s", bt.n, map[bool]string{true: "paced", false: "instant"}[bt.delay > 0]))
		cpu0, pg0 := cpuSeconds(e.pid()), e.postgresCPU()
		var wire, events, reconnects int64
		want := answerBytes(bt.n)
		for range bt.answers {
			st, err := b.relayOne(ctx, p, th, spec{n: bt.n, delay: bt.delay})
			if err != nil {
				return err
			}
			wire += st.wire
			events += st.events
			reconnects += int64(st.reconnects)
		}
		e.settle(0, 10*time.Second)
		cpu, pgCPU := cpuSeconds(e.pid())-cpu0, e.postgresCPU()-pg0
		b.stopProfile(ctx)
		wal := e.walBytes(ctx) - wal0
		k := float64(bt.answers)
		model := "instant"
		if bt.delay > 0 {
			model = "paced " + bt.delay.String()
		}
		perTok := cpu / (k * float64(bt.n)) * 1e6
		cpuPerAnswer[key{bt.n, bt.delay > 0}] = cpu / k
		r.printf("%-6d %-10s %3d  %10d %9.0f %8.2f %9.0f %7.1fms %8.1fµs %7.1fms %9.2f %6d", bt.n, model, bt.answers, want,
			float64(wire)/k, float64(wire)/k/float64(want), float64(events)/k, cpu/k*1000, perTok, pgCPU/k*1000, float64(wal)/k/float64(want), reconnects)
		if bt.n == 2000 && bt.delay == 0 {
			b.relayInstantUS = perTok
		}
		if bt.n == 2000 && bt.delay > 0 {
			b.relayPacedUS = perTok
		}
		if bt.delay >= 20*time.Millisecond {
			b.relayPaced20US = perTok
		}
		if bt.n == 20000 {
			long = fmt.Sprintf("one paced 20,000-token answer (%d bytes, ≈ %.0f s): PostgreSQL WAL %.2f MB (%.2f× the answer), PostgreSQL CPU %.0f ms",
				want, float64(bt.n)*bt.delay.Seconds(), float64(wal)/(1<<20), float64(wal)/float64(want), pgCPU*1000)
		}
	}
	r.printf("%s", e.since(m))
	if long != "" {
		r.printf("%s", long)
	}
	for _, paced := range []bool{false, true} {
		lo, hi := cpuPerAnswer[key{1000, paced}], cpuPerAnswer[key{10000, paced}]
		name := "instant"
		if paced {
			name = "paced 1ms"
		}
		r.printf("marginal CPU per token (%s), from the 1,000 and 10,000 token answers: %.1f µs", name, (hi-lo)/9000*1e6)
	}
	f1, f20, err := b.floor(ctx)
	if err != nil {
		return err
	}
	b.relayFloor1US, b.relayFloor20US = f1, f20
	r.printf("weft ÷ relay floor: paced 1 ms %.1f÷%.1f = %.2f×; paced 20 ms %.1f÷%.1f = %.2f×", b.relayPacedUS, f1, b.relayPacedUS/f1, b.relayPaced20US, f20, b.relayPaced20US/f20)
	r.printf("budget: relay < 50 µs CPU per token → instant %s (%.1f µs), paced 1 ms %s (%.1f µs), paced 20 ms %s (%.1f µs; this machine's floor %.1f µs); bytes on the wire O(n): see wire/ans by size",
		verdict(b.relayInstantUS < 50), b.relayInstantUS, verdict(b.relayPacedUS < 50), b.relayPacedUS, verdict(b.relayPaced20US < 50), b.relayPaced20US, f20)
	return nil
}

type relayStats struct {
	wire, events int64
	reconnects   int
}

// relayOne appends one answer and reads its stream to the end, rebuilding
// the text from the snapshot and the deltas.
func (b *bench) relayOne(ctx context.Context, p *person, thread int64, sp spec) (relayStats, error) {
	ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	var st relayStats
	run, err := p.appendMessage(ctx, thread, sp.message("relay"))
	if err != nil {
		return st, err
	}
	var text strings.Builder
	done := false
	for attempt := 0; !done; attempt++ {
		if attempt > 5 {
			return st, fmt.Errorf("run %d: no done event after %d reconnections", run, attempt-1)
		}
		// Each connection starts from its snapshot; one that finds the run
		// already finished gets only the done event.
		text.Reset()
		n, err := p.stream(ctx, run, func(ev event) {
			st.events++
			switch ev.name {
			case views.EventSnapshot:
				text.Reset()
				text.WriteString(ev.data)
			case views.EventDelta:
				text.WriteString(ev.data)
			case views.EventDone:
				done = true
			}
		})
		st.wire += n
		switch {
		case err == nil:
		case errors.Is(err, errNoDone):
			st.reconnects++
		default:
			return st, fmt.Errorf("run %d: %w", run, err)
		}
	}
	// Text that arrived only in the done event (the run ended before the
	// stream opened) is not checked; a live stream must rebuild it exactly.
	if text.Len() > 0 {
		var want strings.Builder
		for i := range sp.n {
			want.WriteString(word(i))
		}
		if text.String() != want.String() {
			return st, fmt.Errorf("run %d: the stream rebuilt %d bytes that differ from the %d-byte answer", run, text.Len(), want.Len())
		}
	}
	return st, nil
}
