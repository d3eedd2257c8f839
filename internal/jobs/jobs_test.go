package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"weft/db"
	"weft/internal/jobs"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type pingArgs struct {
	N int `json:"n"`
}

func (pingArgs) Kind() string { return "jobs_test_ping" }

// pinged is what a worked ping job reports: its number and its queue.
type pinged struct {
	n     int
	queue string
}

type pingWorker struct {
	river.WorkerDefaults[pingArgs]
	done chan pinged
}

func (w *pingWorker) Work(ctx context.Context, job *river.Job[pingArgs]) error {
	w.done <- pinged{job.Args.N, job.Queue}
	return nil
}

// newQueue builds a queue over store with a ping worker registered (after
// New, as every part registers); the test starts it.
func newQueue(t *testing.T, store *db.DB, cfg jobs.Config, periodic ...*river.PeriodicJob) (*jobs.Queue, chan pinged) {
	t.Helper()
	q, err := jobs.New(store.Pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan pinged, 10)
	if err := q.Register(func(w *river.Workers) error { return river.AddWorkerSafely(w, &pingWorker{done: done}) }, periodic...); err != nil {
		t.Fatal(err)
	}
	return q, done
}

func TestAWorkerRegisteredAfterTheQueueIsBuiltWorksJobsOfItsQueue(t *testing.T) {
	t.Parallel()
	q, done := newQueue(t, testenv.NewDB(t), jobs.Config{Queues: map[string]int{river.QueueDefault: 1, "other": 1}})
	testenv.StartJobs(t, q)
	if err := q.Insert(context.Background(), pingArgs{N: 7}, &river.InsertOpts{Queue: "other"}); err != nil {
		t.Fatal(err)
	}
	if got := testwait.Recv(t, "the ping job", 0, done); got != (pinged{7, "other"}) {
		t.Errorf("worked %+v, want job 7 in queue other", got)
	}
}

func TestAJobInsertedInARolledBackTransactionNeverRuns(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	q, done := newQueue(t, store, jobs.Config{Queues: map[string]int{river.QueueDefault: 1}})
	ctx := context.Background()
	tx, err := store.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.InsertTx(ctx, tx, pingArgs{N: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Insert(ctx, pingArgs{N: 2}, nil); err != nil {
		t.Fatal(err)
	}
	// Inserted before the queue starts, with one worker: had job 1 existed,
	// it would have run first.
	testenv.StartJobs(t, q)
	if got := testwait.Recv(t, "the committed job", 0, done); got.n != 2 {
		t.Errorf("the first job worked is %d, want 2 (1 was rolled back)", got.n)
	}
}

func TestAPeriodicJobRegisteredBeforeStartRunsOnStart(t *testing.T) {
	t.Parallel()
	q, done := newQueue(t, testenv.NewDB(t), jobs.Config{Queues: map[string]int{river.QueueDefault: 1}},
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return pingArgs{N: 3}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}))
	testenv.StartJobs(t, q)
	if got := testwait.Recv(t, "the periodic job's first run", 0, done); got.n != 3 {
		t.Errorf("worked job %d, want the periodic job 3", got.n)
	}
}

func TestAQueuePlanWithoutQueuesIsRefused(t *testing.T) {
	if _, err := jobs.New(nil, jobs.Config{}); err == nil {
		t.Error("a queue with no queues to work was built")
	}
}

func TestRegisteringWorkersAfterStartIsRefused(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t, testenv.NewDB(t), jobs.Config{Queues: map[string]int{river.QueueDefault: 1}})
	testenv.StartJobs(t, q)
	added := false
	err := q.Register(func(*river.Workers) error { added = true; return nil })
	if err == nil || added {
		t.Fatalf("Register after Start: err %v, workers added %v; want a refusal before touching the workers", err, added)
	}
}
