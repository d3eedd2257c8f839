package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"weft/chat"
	"weft/db"
	"weft/internal/jobs"
)

// MemoryQueue is the job queue of silent memory extraction (issue 17).
const MemoryQueue = "memory"

// MemoryExtractArgs asks for the lasting facts of one answer.
type MemoryExtractArgs struct {
	User    int64 `json:"user"`
	Message int64 `json:"message"`
}

// Kind names the job.
func (MemoryExtractArgs) Kind() string { return "memory_extract" }

// memoryExtractor runs silent extraction after a turn: Answered inserts a
// job when the user has it on; the job asks the model (chat.Runtime).
type memoryExtractor struct {
	store *db.DB
	queue *jobs.Queue
	rt    *chat.Runtime // set once the runtime is built, before the queue starts
}

type memoryExtractWorker struct {
	river.WorkerDefaults[MemoryExtractArgs]
	x *memoryExtractor
}

func (w *memoryExtractWorker) Timeout(*river.Job[MemoryExtractArgs]) time.Duration {
	return 2 * time.Minute
}

func (w *memoryExtractWorker) Work(ctx context.Context, job *river.Job[MemoryExtractArgs]) error {
	kept, err := w.x.rt.ExtractMemories(ctx, job.Args.User, job.Args.Message)
	if err != nil {
		slog.Warn("memory extraction", "message", job.Args.Message, "err", err)
		return nil // not retried: the next turn has its own chance
	}
	if len(kept) > 0 {
		slog.Info("memories extracted", "user", job.Args.User, "message", job.Args.Message, "count", len(kept))
	}
	return nil
}

func (x *memoryExtractor) register() error {
	return x.queue.Register(func(w *river.Workers) error {
		return river.AddWorkerSafely(w, &memoryExtractWorker{x: x})
	})
}

// answered queues an extraction for a completed answer when the user has
// extraction on (a quick read and insert: Answered must not block).
func (x *memoryExtractor) answered(user, thread, msg int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	on, err := x.store.MemoryExtract(ctx, user)
	if err != nil || !on {
		return
	}
	if err := x.queue.Insert(ctx, MemoryExtractArgs{User: user, Message: msg},
		&river.InsertOpts{MaxAttempts: 1, Queue: MemoryQueue}); err != nil {
		slog.Warn("queue memory extraction", "message", msg, "err", err)
	}
}
