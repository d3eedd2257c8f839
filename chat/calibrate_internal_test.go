package chat

import (
	"context"
	"math"
	"sync"
	"testing"
)

// calibrationStore records the batches written and holds the first write
// until released.
type calibrationStore struct {
	Store
	started, release chan struct{}
	mu               sync.Mutex
	writes           []calibrationBatch
}

func (s *calibrationStore) Calibrate(_ context.Context, model string, charsPerToken float64, samples int) error {
	s.mu.Lock()
	first := len(s.writes) == 0
	s.writes = append(s.writes, calibrationBatch{sum: charsPerToken * float64(samples), n: samples})
	s.mu.Unlock()
	if first {
		close(s.started)
		<-s.release
	}
	return nil
}

// Answers that finish while a calibration write is under way are saved
// together in one write, not one write (and one wait on the model's row)
// each.
func TestObservationsDuringACalibrationWriteAreSavedInOneWrite(t *testing.T) {
	s := &calibrationStore{started: make(chan struct{}), release: make(chan struct{})}
	c := newCalibrator(s)
	c.start()
	c.observe("m:latest", 4)
	<-s.started
	for i := range 50 {
		c.observe("m:latest", 2+float64(i%2)) // mean 2.5
	}
	close(s.release)
	c.stop()
	if len(s.writes) != 2 {
		t.Fatalf("%d writes for 51 observations (%+v), want 2: the first alone, the fifty together", len(s.writes), s.writes)
	}
	if w := s.writes[1]; w.n != 50 || math.Abs(w.sum/float64(w.n)-2.5) > 1e-9 {
		t.Errorf("second write: %d samples of mean %.3f, want 50 of mean 2.5", w.n, w.sum/float64(w.n))
	}
}
