package testwait

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsAsSoonAsTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	go func() {
		for i := 0; i < 3; i++ {
			n.Add(1)
		}
	}()
	if !Until(0, func() bool { return n.Load() == 3 }) {
		t.Fatal("the condition held but Until said it did not")
	}
}

func TestUntilGivesUpAtTheDeadline(t *testing.T) {
	start := time.Now()
	if Until(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds was reported as held")
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Fatal("Until gave up before its deadline")
	}
}

func TestRecvReturnsTheValueSent(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Recv(t, "a value", 0, ch); got != 7 {
		t.Fatalf("got %d, want 7", got)
	}
}
