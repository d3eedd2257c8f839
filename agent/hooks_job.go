// The outbox's job: one delivery of one event to one hook, retried with a
// doubling backoff until it is delivered or given up.

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"weft/db"
)

// HookDeliveryArgs is the job of one outbox row.
type HookDeliveryArgs struct {
	Delivery int64 `json:"delivery"`
}

// Kind names the job.
func (HookDeliveryArgs) Kind() string { return "hook_delivery" }

type hookWorker struct {
	river.WorkerDefaults[HookDeliveryArgs]
	h *hooks
}

// Timeout bounds one attempt: longer than the longest a hook may take
// (the queue's default, 5 minutes, would cut a 300 s hook short, and the
// attempt would end without recording its outcome), shorter than the
// queue's rescue of stuck jobs (JobTimeout + 1 min).
func (w *hookWorker) Timeout(*river.Job[HookDeliveryArgs]) time.Duration {
	return maxHookTimeout + 30*time.Second
}

// NextRetry doubles the wait from RetryBackoff, up to 5 minutes.
func (w *hookWorker) NextRetry(job *river.Job[HookDeliveryArgs]) time.Time {
	wait := w.h.cfg.RetryBackoff
	for i := 1; i < job.Attempt && wait < 5*time.Minute; i++ {
		wait *= 2
	}
	return time.Now().Add(min(wait, 5*time.Minute))
}

// Work makes the delivery. It is idempotent: a delivery already made or
// given up is not made again, and the event's id is the same on every
// attempt, so a receiver that got it twice (its answer was lost) can tell.
func (w *hookWorker) Work(ctx context.Context, job *river.Job[HookDeliveryArgs]) error {
	return w.h.deliver(ctx, job.Args.Delivery, job.Attempt >= job.MaxAttempts)
}

// deliver makes one attempt at a delivery; last: no attempt follows.
func (h *hooks) deliver(ctx context.Context, id int64, last bool) error {
	d, err := h.store.HookDeliveryByID(ctx, id)
	if errors.Is(err, db.ErrNotFound) {
		return nil // its run or its hook was deleted
	}
	if err != nil {
		return err
	}
	if d.DeliveredAt != nil || d.GivenUpAt != nil {
		return nil
	}
	t, gone, err := h.targetOf(ctx, d)
	if err != nil {
		return err
	}
	if gone != "" {
		_, err := h.store.HookAttempted(ctx, d.ID, false, true, gone, 0)
		return err
	}
	var sendErr error
	release, ok := func() {}, true
	if t.ws != 0 {
		release, ok = h.take(ctx, t.ws)
	}
	if ok {
		_, sendErr = h.send.send(ctx, t, d.Event, d.EventID, []byte(d.Body))
		release()
	} else if ctx.Err() == nil {
		// Its workspace's other deliveries have held their share of the
		// workers all this while: this attempt fails, and the retries'
		// backoff spaces the rest (a receiver that never answers has
		// its deliveries given up, instead of piling up).
		sendErr = fmt.Errorf("not sent: %d deliveries of this workspace's hooks were under way for %s", wsInFlight, wsWait)
	} else {
		sendErr = ctx.Err()
	}
	if sendErr != nil && ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			// The server is stopping: the attempt did not happen, and
			// is made again at once by the next instance.
			return river.JobSnooze(0)
		}
		return ctx.Err()
	}
	givenUp := sendErr != nil && last
	errText := ""
	if sendErr != nil {
		errText = sendErr.Error()
	}
	d, err = h.store.HookAttempted(ctx, d.ID, sendErr == nil, givenUp, errText, 0)
	if err != nil {
		return err
	}
	h.trace(ctx, d, t, givenUp)
	if sendErr != nil {
		return fmt.Errorf("hook %s: %w", t.label(), sendErr)
	}
	return nil
}

// targetOf finds a delivery's hook as it is now; gone says why it no
// longer exists.
func (h *hooks) targetOf(ctx context.Context, d db.HookDelivery) (target, string, error) {
	if d.WorkspaceHookID != nil {
		wh, err := h.store.WorkspaceHookByID(ctx, *d.WorkspaceHookID)
		if errors.Is(err, db.ErrNotFound) {
			return target{}, "the hook was removed", nil
		}
		if err != nil {
			return target{}, "", err
		}
		return workspaceTarget(wh), "", nil
	}
	if t, ok := h.adminByKey(d.HookKey); ok {
		return t, "", nil
	}
	return target{}, "the hook is no longer in the hooks file", nil
}

// trace shows the attempt in the run's trace: it updates the delivery's
// step, or adds one for a failure once the run has ended (while it runs,
// the run adds them itself at the end of each turn).
func (h *hooks) trace(ctx context.Context, d db.HookDelivery, t target, givenUp bool) {
	if d.RunID == nil {
		return
	}
	data := failureData(d, t.label())
	status := db.StepError
	switch {
	case d.DeliveredAt != nil:
		status, data.Error = db.StepOK, fmt.Sprintf("Delivered on attempt %d.", d.Attempts)
	case givenUp:
		data.Error = fmt.Sprintf("Delivery failed %d times and was given up: %s.", d.Attempts, d.LastError)
	}
	if d.StepID != nil {
		s, err := h.store.StepByID(ctx, *d.RunID, *d.StepID)
		if err == nil {
			data.CallStep, data.Round, data.DurationMS = s.Data.CallStep, s.Data.Round, s.Data.DurationMS
			_, err = h.store.UpdateStep(ctx, s.ID, status, data, nil)
		}
		if err != nil && !errors.Is(err, db.ErrNotFound) {
			slog.Warn("hook delivery step", "delivery", d.ID, "err", err)
		}
		return
	}
	if d.DeliveredAt != nil || slices.Contains(quietEvents, d.Event) {
		return
	}
	ended, err := h.store.RunEnded(ctx, *d.RunID)
	if err != nil || !ended {
		return
	}
	s, err := h.store.AddStep(ctx, *d.RunID, db.StepHook, status, data, nil)
	if err != nil {
		slog.Warn("hook delivery step", "delivery", d.ID, "err", err)
		return
	}
	if err := h.store.SetHookDeliveryStep(ctx, d.ID, s.ID); err != nil {
		slog.Warn("hook delivery step", "delivery", d.ID, "err", err)
	}
}

// HookPruneArgs is the periodic clean-up of the outbox: deliveries made or
// given up more than a week ago go (their failures stay in the traces).
type HookPruneArgs struct{}

// Kind names the job.
func (HookPruneArgs) Kind() string { return "hook_prune" }

type hookPruneWorker struct {
	river.WorkerDefaults[HookPruneArgs]
	h *hooks
}

func (w *hookPruneWorker) Work(ctx context.Context, job *river.Job[HookPruneArgs]) error {
	_, err := w.h.store.PruneHookDeliveries(ctx, time.Now().Add(-7*24*time.Hour))
	return err
}

func pruneEvery() *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(6*time.Hour),
		func() (river.JobArgs, *river.InsertOpts) { return HookPruneArgs{}, &river.InsertOpts{Queue: HookQueue} }, nil)
}
