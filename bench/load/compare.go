package main

import (
	"fmt"
	"time"
)

// sideBySide prints the figures of the DESIGN §13 summary for the base
// commit and for the new build, with new ÷ base (below 1: better, for every
// row: all are costs).
func sideBySide(r *report, cfg config, base, head *bench, order string) {
	from := "the working tree"
	if cfg.rev != "" {
		from = cfg.rev
	}
	r.section(fmt.Sprintf("side by side: %s (base) and %s (new), one run, %s", cfg.compare, from, order))
	r.printf("%-52s %14s %14s %9s", "figure", "base", "new", "new÷base")
	row := func(name string, b, h float64, unit string) {
		ratio := "—"
		if b > 0 && h > 0 {
			ratio = fmt.Sprintf("%.2f", h/b)
		}
		r.printf("%-52s %14s %14s %9s", name, num(b, unit), num(h, unit), ratio)
	}
	msf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	if cfg.modes["latency"] {
		row("first-token added p50, 1 at a time", msf(base.firstTokenP50), msf(head.firstTokenP50), "ms")
		row(fmt.Sprintf("first-token added p50, %d at a time", cfg.latencyConc), msf(base.firstTokenConcP50), msf(head.firstTokenConcP50), "ms")
	}
	if cfg.modes["relay"] {
		row("relay CPU per token, instant model", base.relayInstantUS, head.relayInstantUS, "µs")
		row("relay CPU per token, a token every 1 ms", base.relayPacedUS, head.relayPacedUS, "µs")
		row("relay CPU per token, a token every 20 ms", base.relayPaced20US, head.relayPaced20US, "µs")
		row("  this machine's relay floor at 20 ms", base.relayFloor20US, head.relayFloor20US, "µs")
	}
	for i, h := range head.conc {
		var b concSummary
		if i < len(base.conc) && base.conc[i].n == h.n {
			b = base.conc[i]
		}
		row(fmt.Sprintf("%d streams: p99 added delay", h.n), msf(b.p99), msf(h.p99), "ms")
		row(fmt.Sprintf("%d streams: VmHWM", h.n), float64(b.hwm)/1024, float64(h.hwm)/1024, "MB")
		row(fmt.Sprintf("%d streams: CPU per token, all-in", h.n), b.cpuPerTokUS, h.cpuPerTokUS, "µs")
		row(fmt.Sprintf("%d streams: failed or incomplete", h.n), float64(b.failed), float64(h.failed), "")
	}
	if cfg.modes["instances"] {
		row("cross-instance delta p50", msf(base.crossP50), msf(head.crossP50), "ms")
		row("cross-instance delta p99", msf(base.crossP99), msf(head.crossP99), "ms")
		row("cross-instance delta p99, 20 answers at once", msf(base.crossConcP99), msf(head.crossConcP99), "ms")
		row("Stop across instances p99", msf(base.stopP99), msf(head.stopP99), "ms")
	}
	if cfg.modes["idle"] {
		row("idle RSS", float64(base.idleRSS)/1024, float64(head.idleRSS)/1024, "MB")
	}
}

func num(v float64, unit string) string {
	if unit == "" {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}
