package main

import (
	"fmt"
	"strings"
	"testing"
)

// The baseline's passages cover the whole text in windows of at most the
// size, each starting within the previous one (the overlap) at a word.
func TestPassagesCoverTheTextWithOverlap(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 10_000; i++ {
		fmt.Fprintf(&b, "%s%d ", strings.Repeat("x", i%13), i) // no word repeats
	}
	text := strings.TrimSpace(b.String())
	ps := passages(text, 1500, 200)
	if len(ps) < 7 {
		t.Fatalf("%d passages of 1,500 characters for %d characters", len(ps), len(text))
	}
	at := 0
	for i, p := range ps {
		if len(p) > 1500 {
			t.Errorf("passage %d has %d characters", i, len(p))
		}
		start := strings.Index(text[max(0, at-1500):], p) + max(0, at-1500)
		if start < 0 || start > at {
			t.Fatalf("passage %d starts at %d, after the end of the previous one (%d)", i, start, at)
		}
		if i > 0 && (at-start < 100 || at-start > 200) {
			t.Errorf("passage %d overlaps the previous one by %d characters", i, at-start)
		}
		if start > 0 && text[start-1] != ' ' {
			t.Errorf("passage %d starts inside a word: %q", i, p[:10])
		}
		at = start + len(p)
	}
	if at != len(text) {
		t.Errorf("the passages end at %d of %d", at, len(text))
	}
	if got := passages("short text", 1500, 200); len(got) != 1 || got[0] != "short text" {
		t.Errorf("a short text gives %q", got)
	}
}

func TestOrderIsHighestFirstTiesByIndex(t *testing.T) {
	got := order([]float64{0.5, 2, 0.5, 3})
	want := []int{3, 1, 0, 2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order = %v, want %v", got, want)
		}
	}
}
