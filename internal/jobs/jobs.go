// Package jobs is Weft's one background job queue: a River client on the
// database pool, with the queues every part works. The application
// (internal/app) builds it before the parts that use it; each part (rag,
// media) is given it at construction, adds its workers and periodic jobs
// there, and inserts its jobs — in the transaction of the rows they work on
// when there is one. Nothing runs until Start.
//
// It must never know what a job does: workers belong to the part that
// defines the job.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// Config is the queue plan of an instance.
type Config struct {
	// Queues names every queue this instance works, with how many of its
	// jobs it runs at once (default 2). Parts keep queues of their own so
	// that one part's slow jobs cannot hold up another's.
	Queues map[string]int
	// JobTimeout bounds one attempt of a job (default 5 min); the next
	// attempt resumes.
	JobTimeout time.Duration
	// RescueAfter: a job still "running" this long (its instance died)
	// runs again (default JobTimeout + 1 min).
	RescueAfter time.Duration
}

// Queue is the job queue: inserts at any time, works jobs between Start and
// Stop.
type Queue struct {
	client  *river.Client[pgx.Tx]
	workers *river.Workers
	// started refuses Register after Start: River's workers bundle is
	// an unlocked map its producers read while they work.
	started atomic.Bool
}

// New builds the queue on pool. Parts register their workers before Start.
func New(pool *pgxpool.Pool, cfg Config) (*Queue, error) {
	if len(cfg.Queues) == 0 {
		return nil, errors.New("job queue: no queues")
	}
	if cfg.JobTimeout <= 0 {
		cfg.JobTimeout = 5 * time.Minute
	}
	if cfg.RescueAfter <= 0 {
		cfg.RescueAfter = cfg.JobTimeout + time.Minute
	}
	queues := make(map[string]river.QueueConfig, len(cfg.Queues))
	for name, n := range cfg.Queues {
		if n < 1 {
			n = 2
		}
		queues[name] = river.QueueConfig{MaxWorkers: n}
	}
	// River reads its workers bundle when it works a job, so the parts
	// built after the client can still add theirs (before Start).
	workers := river.NewWorkers()
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:               queues,
		Workers:              workers,
		JobTimeout:           cfg.JobTimeout,
		RescueStuckJobsAfter: cfg.RescueAfter,
		Logger:               slog.New(levelFilter{slog.Default().Handler(), slog.LevelWarn}),
	})
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	return &Queue{client: client, workers: workers}, nil
}

// Register adds a part's workers (add calls river.AddWorkerSafely on the
// bundle) and its periodic jobs. Call it while building the part, before
// Start.
func (q *Queue) Register(add func(*river.Workers) error, periodic ...*river.PeriodicJob) error {
	if q.started.Load() {
		return errors.New("job queue: workers registered after Start")
	}
	if err := add(q.workers); err != nil {
		return fmt.Errorf("job queue: %w", err)
	}
	if _, err := q.client.PeriodicJobs().AddManySafely(periodic); err != nil {
		return fmt.Errorf("job queue: %w", err)
	}
	return nil
}

// Insert queues a job.
func (q *Queue) Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) error {
	_, err := q.client.Insert(ctx, args, opts)
	return err
}

// InsertTx queues a job in tx: it exists if and only if tx commits.
func (q *Queue) InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) error {
	_, err := q.client.InsertTx(ctx, tx, args, opts)
	return err
}

// Start begins working the queues (jobs left by a previous life resume).
// River takes ctx's cancellation as a hard stop: give it a context that
// outlives the shutdown signal.
func (q *Queue) Start(ctx context.Context) error {
	q.started.Store(true)
	return q.client.Start(ctx)
}

// Stop lets running jobs finish for as long as ctx allows (they resume on
// the next start when they do not).
func (q *Queue) Stop(ctx context.Context) error { return q.client.Stop(ctx) }

// StopAndCancel cancels running jobs and waits for them to return.
func (q *Queue) StopAndCancel(ctx context.Context) error { return q.client.StopAndCancel(ctx) }

// levelFilter drops River's records below a level (its INFO lines would
// drown the request log).
type levelFilter struct {
	slog.Handler
	min slog.Level
}

func (l levelFilter) Enabled(ctx context.Context, lv slog.Level) bool {
	return lv >= l.min && l.Handler.Enabled(ctx, lv)
}
