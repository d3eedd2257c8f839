package chat

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// calibrator saves the models' calibration observations off the answer's
// path. Every answer of a model updates the same row; with one write per
// answer, answers finishing together queued on that row's lock, each
// holding a pooled connection meanwhile (1,000 streams ending within 5 s on
// 2 cores: 102 ms a call, a third of the pool waiting). Observations are
// instead gathered per model and one writer goroutine saves each model's
// batch in one upsert: at once when it is idle, so a lone answer's sample
// is saved within a round trip, and otherwise everything that arrived
// during the previous write together.
type calibrator struct {
	store Store

	mu      sync.Mutex
	pending map[string]calibrationBatch

	wakeC chan struct{}
	stopC chan struct{}
	done  chan struct{} // closed when the loop ended (nil: never started)
}

// calibrationBatch is what a model's answers observed since the last
// write: the sum of their characters per token, and how many.
type calibrationBatch struct {
	sum float64
	n   int
}

func newCalibrator(store Store) *calibrator {
	return &calibrator{store: store, pending: map[string]calibrationBatch{},
		wakeC: make(chan struct{}, 1), stopC: make(chan struct{})}
}

// observe adds one observation of model's characters per token.
func (c *calibrator) observe(model string, charsPerToken float64) {
	c.mu.Lock()
	b := c.pending[model]
	b.sum += charsPerToken
	b.n++
	c.pending[model] = b
	c.mu.Unlock()
	select {
	case c.wakeC <- struct{}{}:
	default:
	}
}

// start runs the writer until stop.
func (c *calibrator) start() {
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		for {
			select {
			case <-c.stopC:
				c.write()
				return
			case <-c.wakeC:
			}
			c.write()
		}
	}()
}

// write saves every model's pending batch. A write that fails drops its
// batch: a sample is an estimate's refinement, and the next answers bring
// more.
func (c *calibrator) write() {
	c.mu.Lock()
	batches := c.pending
	c.pending = map[string]calibrationBatch{}
	c.mu.Unlock()
	for model, b := range batches {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.store.Calibrate(ctx, model, b.sum/float64(b.n), b.n)
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			slog.Warn("calibrate", "model", model, "samples", b.n, "err", err)
		}
	}
}

// stop saves what is pending and ends the loop.
func (c *calibrator) stop() {
	if c.done == nil {
		return
	}
	select {
	case <-c.stopC:
	default:
		close(c.stopC)
	}
	<-c.done
}
