// Package testwait is how Weft's tests wait: on a channel or a condition,
// always with a deadline, never with a bare sleep (River's WaitOrTimeout
// is the model). A wait that times out fails the test with what it waited
// for, so a lost event is a red test, not a slow green one.
package testwait

import (
	"testing"
	"time"
)

// Timeout is how long a wait lasts unless told otherwise: long enough for
// a loaded two-core CI machine, short enough that a lost event fails fast.
const Timeout = 15 * time.Second

// pollEvery is how often For checks a condition that nothing signals
// (a row in the database, a file on disk).
const pollEvery = 5 * time.Millisecond

// For waits until cond holds, checking it every few milliseconds, and
// fails the test with what when it still does not after timeout (0:
// Timeout).
func For(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if !Until(timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", orDefault(timeout), what)
	}
}

// Until reports whether cond held within timeout (0: Timeout), for a test
// that asserts something else when it did not.
func Until(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(orDefault(timeout))
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// Recv waits for a value from ch and returns it; it fails the test with
// what when none arrives within timeout (0: Timeout) or ch is closed.
func Recv[T any](t testing.TB, what string, timeout time.Duration, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(orDefault(timeout))
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the channel closed instead", what)
		}
		return v
	case <-timer.C:
		t.Fatalf("timed out after %s waiting for %s", orDefault(timeout), what)
	}
	var zero T
	return zero
}

// Closed waits until ch is closed (or yields), failing like Recv.
func Closed[T any](t testing.TB, what string, timeout time.Duration, ch <-chan T) {
	t.Helper()
	timer := time.NewTimer(orDefault(timeout))
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("timed out after %s waiting for %s", orDefault(timeout), what)
	}
}

func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return Timeout
	}
	return d
}
