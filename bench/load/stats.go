package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// dist is a set of durations (nanoseconds) with nearest-rank percentiles.
type dist []int64

func (d dist) sorted() dist {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}

// pct returns the q-quantile (0 < q ≤ 1) by nearest rank of a sorted dist.
func (d dist) pct(q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return time.Duration(d[max(0, min(i, len(d)-1))])
}

func (d dist) mean() time.Duration {
	if len(d) == 0 {
		return 0
	}
	var sum float64
	for _, v := range d {
		sum += float64(v)
	}
	return time.Duration(sum / float64(len(d)))
}

// summary is "n=… p50 … p95 … p99 … max …" in milliseconds.
func (d dist) summary() string {
	s := d.sorted()
	if len(s) == 0 {
		return "n=0"
	}
	return fmt.Sprintf("n=%-6d p50 %s  p95 %s  p99 %s  max %s  mean %s",
		len(s), ms(s.pct(0.50)), ms(s.pct(0.95)), ms(s.pct(0.99)), ms(time.Duration(s[len(s)-1])), ms(s.mean()))
}

func ms(d time.Duration) string { return fmt.Sprintf("%8.2f ms", float64(d)/float64(time.Millisecond)) }

func mb(kb int64) string { return fmt.Sprintf("%.1f MB", float64(kb)/1024) }

// report collects the text of the results; every line also goes to stdout
// as soon as it is written.
type report struct {
	b   strings.Builder
	out io.Writer
}

func (r *report) printf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	r.b.WriteString(s)
	_, _ = io.WriteString(r.out, s)
}

func (r *report) section(title string) {
	r.printf("\n== %s ==", title)
}
