package chat

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/ollama/ollama/api"

	"weft/db"
)

// Store is what the runtime needs from the database.
type Store interface {
	SendMessage(ctx context.Context, user int64, s db.Send) (db.Sent, error)
	RetryAnswer(ctx context.Context, user, assistantMsg int64, route db.Router, model string) (db.Sent, error)
	EditMessage(ctx context.Context, user, message int64, content string, route db.Router) (db.Sent, error)
	ContinueAnswer(ctx context.Context, user, message int64, kind string) (db.Sent, error)
	DeleteMessage(ctx context.Context, user, message int64) (db.DeletedSubtree, error)
	CancelThreadRuns(ctx context.Context, user, thread int64) ([]int64, error)
	CancelUserRuns(ctx context.Context, user int64) ([]int64, error)
	DeleteThread(ctx context.Context, user, id int64) ([]string, error)
	Message(ctx context.Context, user, id int64) (db.Message, error)
	ClaimNextRun(ctx context.Context, thread int64, instance string, userCap int) (db.Run, bool, error)
	ThreadsWithQueuedRuns(ctx context.Context, owner int64) ([]int64, error)
	SaveProgress(ctx context.Context, parts []db.Progress, live []int64) (stop, broken []int64, err error)
	FinishRun(ctx context.Context, run, msg int64, f db.Finish) (db.Message, error)
	CancelRun(ctx context.Context, user, id int64) (db.Run, error)
	Thread(ctx context.Context, user, id int64) (db.Thread, error)
	TurnsTo(ctx context.Context, user, message int64, limit int) ([]db.Message, error)
	SetGeneratedTitle(ctx context.Context, user, id int64, title string) (bool, error)
	ContextSources(ctx context.Context, user, thread int64) (db.ContextSources, error)
	Compactions(ctx context.Context, user, thread int64, under []int64) ([]db.Message, error)
	AddCompaction(ctx context.Context, user, through int64, summary string, meta db.MessageMeta) (db.Message, error)
	Calibration(ctx context.Context, model string) (float64, int, error)
	Calibrate(ctx context.Context, model string, charsPerToken float64, samples int) error
	ThreadKBs(ctx context.Context, user, thread int64) ([]db.KnowledgeBase, error)
	SetSources(ctx context.Context, msg int64, sources any) error
	Heartbeat(ctx context.Context, instance string) error
	InterruptOrphanedRuns(ctx context.Context, self string, staleAfter time.Duration) ([]db.Run, error)
	AdoptWaitingRuns(ctx context.Context, self string, own bool, staleAfter time.Duration) ([]db.Run, error)
	ResumeRun(ctx context.Context, user, run int64) (db.Run, error)
	Attachments(ctx context.Context, user int64, msgs []int64) (map[int64][]db.Attachment, error)
	// ReadSnapshot runs fn over one read-only snapshot of the database.
	ReadSnapshot(ctx context.Context, fn func(s *db.DB) error) error
	Run(ctx context.Context, user, id int64) (db.Run, error)
	// ProgressAfter, Listen and Notify are how instances follow each
	// other's runs (chat/notes.go).
	ProgressAfter(ctx context.Context, user, msg int64, after int) (db.Followed, error)
	Listen(ctx context.Context, connected func(), note func(db.Note))
	Notify(ctx context.Context, kind byte, id int64) error
	// Rooms (chat/rooms*.go).
	PostToRoom(ctx context.Context, user int64, p db.RoomPost) (db.RoomPosted, error)
	QueueRoomMentions(ctx context.Context, r db.Run, agents []int64, defaultModel string, route db.Router) (db.RoomPosted, error)
	RoomRunProfile(ctx context.Context, owner, thread, agent int64) (db.RoomProfile, error)
}

// Chatter is the part of the Ollama client that answers.
type Chatter interface {
	Chat(ctx context.Context, req *api.ChatRequest, fn api.ChatResponseFunc) error
}

// Config tunes the runtime.
type Config struct {
	Instance    string        // this process's identity in runs.instance_id
	OllamaHost  string        // shown in error messages
	PerUserRuns int           // runs of one user that may run at once (default 3)
	FlushEvery  time.Duration // how often partial answers reach the database (default 1s)
	// FollowedFlushEvery is how often a run followed from another instance
	// saves its progress (default 20ms).
	FollowedFlushEvery time.Duration
	// MergeWindow: answer text that arrives within it of the previous
	// event is merged into one event (default 5ms; negative: never).
	MergeWindow    time.Duration
	HeartbeatEvery time.Duration // default 5s
	StaleAfter     time.Duration // an instance silent this long is dead (default 20s)
	MaxPath        int           // messages of the path sent to the model (default 10,000)
	// Retriever searches knowledge bases for the rag route (nil: rag
	// answers say that retrieval is unavailable).
	Retriever Retriever
	// WebSearch searches the web for threads with "Search the web" on
	// (nil: their answers say web search is not available).
	WebSearch WebSearcher
	// CompactAt is the context fill (estimated prompt / num_ctx) past which
	// older turns are summarized before sending (default 0.85; 1 or more:
	// only when the prompt does not fit).
	CompactAt float64
	// Agent executes agent runs (nil: agent answers say the agent is not
	// available).
	Agent AgentRunner
	// Blobs reads attached files (nil: images are not sent).
	Blobs BlobReader
	// Files checks and stores the files of a send (nil: files are refused).
	Files Files
	// UserMaxBytes is what one user may store: WEFT_USER_MAX_BYTES (0: 1 GiB).
	UserMaxBytes int64
	// Answered is told about every completed answer (automatic read-aloud
	// and images); it must not block.
	Answered func(user, thread, msg int64)
	// Finalized is given every answer a run settles (complete, failed,
	// stopped or interrupted) once it is stored, before the run's watchers
	// are told; Weft renders the answer there and keeps its HTML (chat does
	// not render: views sits above it). Rendering is bounded (linear in the
	// answer), so it may run inline. nil: nothing is kept, pages render.
	Finalized func(ctx context.Context, user int64, m db.Message)
}

// BlobReader reads stored files by content hash.
type BlobReader interface {
	Read(sha string) ([]byte, error)
}

// Runtime executes runs.
type Runtime struct {
	store  Store
	llm    Chatter
	models *Models
	cfg    Config

	ctx    context.Context // the runtime's life; runs derive from it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	progress *progressWriter // saves live runs' text, off the token path
	calib    *calibrator     // saves the models' calibration, off the answer's path
	notes    *notes          // followers waiting for notes of other instances
	pulls    *Pulls          // model pulls, deletes, unloads (nil: the store keeps no pulls)
	apiRuns  apiRuns         // API answers running here, per user (chat/complete.go)

	mu      sync.Mutex
	live    map[int64]*liveRun
	titles  map[int64]*titleWait // waiters for a thread's next generated title
	closing bool
}

// New returns a runtime; call Start to recover and begin background work.
func New(store Store, llm Chatter, models *Models, cfg Config) *Runtime {
	if cfg.PerUserRuns <= 0 {
		cfg.PerUserRuns = 3
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = time.Second
	}
	if cfg.FollowedFlushEvery <= 0 {
		cfg.FollowedFlushEvery = 20 * time.Millisecond
	}
	if cfg.HeartbeatEvery <= 0 {
		cfg.HeartbeatEvery = 5 * time.Second
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 20 * time.Second
	}
	if cfg.MaxPath <= 0 {
		cfg.MaxPath = 10_000
	}
	if cfg.CompactAt <= 0 {
		cfg.CompactAt = 0.85
	}
	if cfg.MergeWindow == 0 {
		cfg.MergeWindow = 5 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	rt := &Runtime{store: store, llm: llm, models: models, cfg: cfg, ctx: ctx, cancel: cancel,
		progress: newProgressWriter(store, cfg.FlushEvery, cfg.FollowedFlushEvery), calib: newCalibrator(store), notes: newNotes(),
		live: map[int64]*liveRun{}, titles: map[int64]*titleWait{}}
	if ps, ok := store.(PullStore); ok {
		rt.pulls = newPulls(ctx, ps, models, cfg.Instance, cfg.FlushEvery)
	}
	return rt
}

// Pulls returns the management of the models (nil when the store keeps
// no pulls).
func (rt *Runtime) Pulls() *Pulls { return rt.pulls }

// Models returns the model catalogue.
func (rt *Runtime) Models() *Models { return rt.models }

// Start recovers from a previous life of this instance (its runs become
// interrupted, keeping their last flushed text), starts queued runs, and
// keeps a heartbeat so other instances can tell this one is alive.
func (rt *Runtime) Start(ctx context.Context) error {
	if err := rt.store.Heartbeat(ctx, rt.cfg.Instance); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	interrupted, err := rt.store.InterruptOrphanedRuns(ctx, rt.cfg.Instance, rt.cfg.StaleAfter)
	if err != nil {
		return fmt.Errorf("recover runs: %w", err)
	}
	if len(interrupted) > 0 {
		slog.Info("runs interrupted by a previous stop", "count", len(interrupted))
	}
	if rt.pulls != nil {
		rt.pulls.recover(ctx, rt.cfg.Instance, rt.cfg.StaleAfter)
	}
	rt.progress.start()
	rt.calib.start()
	rt.wg.Add(1)
	go rt.listen()
	rt.adoptWaiting(ctx, true)
	rt.kickQueued(ctx, 0)
	rt.wg.Add(1)
	go rt.housekeeping()
	return nil
}

// housekeeping beats the heart, interrupts runs of dead instances and starts
// queued runs that nobody started (their instance died, or their user was at
// the cap).
func (rt *Runtime) housekeeping() {
	defer rt.wg.Done()
	t := time.NewTicker(rt.cfg.HeartbeatEvery)
	defer t.Stop()
	busyAgo := 0 // ticks since a run was last live
	for {
		select {
		case <-rt.ctx.Done():
			return
		case <-t.C:
		}
		// Each model request makes the Ollama client allocate an 8 MB read
		// buffer; once the instance falls idle, hand that garbage back to the
		// OS instead of waiting minutes for the next forced GC.
		if rt.liveCount() > 0 {
			busyAgo = 0
		} else if busyAgo++; busyAgo == 2 {
			debug.FreeOSMemory()
		}
		ctx, cancel := context.WithTimeout(rt.ctx, rt.cfg.HeartbeatEvery)
		if err := rt.store.Heartbeat(ctx, rt.cfg.Instance); err != nil {
			slog.Warn("heartbeat", "err", err)
		}
		if runs, err := rt.store.InterruptOrphanedRuns(ctx, "", rt.cfg.StaleAfter); err != nil {
			slog.Warn("interrupt orphaned runs", "err", err)
		} else if len(runs) > 0 {
			slog.Info("runs of a dead instance interrupted", "count", len(runs))
		}
		if rt.pulls != nil {
			rt.pulls.recover(ctx, "", rt.cfg.StaleAfter)
			rt.pulls.settleStalled(ctx, rt.cfg.StaleAfter)
		}
		rt.adoptWaiting(ctx, false)
		rt.kickQueued(ctx, 0)
		cancel()
	}
}

// adoptWaiting takes over agent runs waiting for their user whose instance
// is gone (own: also this instance's previous life, at start-up), and waits
// for them here.
func (rt *Runtime) adoptWaiting(ctx context.Context, own bool) {
	rt.mu.Lock()
	closing := rt.closing
	rt.mu.Unlock()
	if closing {
		return
	}
	runs, err := rt.store.AdoptWaitingRuns(ctx, rt.cfg.Instance, own, rt.cfg.StaleAfter)
	if err != nil {
		slog.Warn("adopt waiting runs", "err", err)
		return
	}
	for _, r := range runs {
		rt.mu.Lock()
		_, live := rt.live[r.ID]
		rt.mu.Unlock()
		if !live && r.AssistantMessageID != nil {
			slog.Info("waiting agent run adopted", "run", r.ID)
			rt.start(r)
		}
	}
}

// Shutdown stops starting runs, lets running ones finish for as long as ctx
// allows, then stops the rest: they become interrupted with the text they
// have, and can be retried after the restart.
func (rt *Runtime) Shutdown(ctx context.Context) {
	rt.mu.Lock()
	rt.closing = true
	rt.mu.Unlock()
	done := make(chan struct{})
	go func() {
		for rt.busyCount() > 0 {
			select {
			case <-ctx.Done():
				close(done)
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		close(done)
	}()
	<-done
	rt.mu.Lock()
	for _, lr := range rt.live {
		lr.stop(StopShutdown)
	}
	rt.mu.Unlock()
	if rt.pulls != nil {
		rt.pulls.shutdown() // interrupted: a pull resumes when pulled again
	}
	rt.cancel()
	rt.wg.Wait()
	rt.progress.stop()
	rt.calib.stop()
}

// busyCount is the number of live runs that are not waiting for their user
// (a waiting run need not finish before a shutdown: it stays waiting).
func (rt *Runtime) busyCount() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	n := 0
	for _, lr := range rt.live {
		if !lr.waiting() {
			n++
		}
	}
	return n
}

func (rt *Runtime) liveCount() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.live)
}

// Subscribe joins a run executing on this instance. ok is false when the
// run is not live here (queued, finished, or running elsewhere): the caller
// then reads its state from the database.
func (rt *Runtime) Subscribe(runID int64) (snap Snapshot, events <-chan Event, unsubscribe func(), ok bool) {
	rt.mu.Lock()
	lr := rt.live[runID]
	rt.mu.Unlock()
	if lr == nil {
		return Snapshot{}, nil, nil, false
	}
	snap, ch, ok := lr.subscribe()
	if !ok {
		return Snapshot{}, nil, nil, false
	}
	return snap, ch, func() { lr.unsubscribe(ch) }, true
}

// Cancel stops one of the user's runs: a queued one at once, a running one
// by cancelling its model request: here, or through the database flag whose
// note (db.NoteStop) the instance running it hears at once; that instance
// also reads the flag every FlushEvery, should the note be lost.
func (rt *Runtime) Cancel(ctx context.Context, user, runID int64) (db.Run, error) {
	r, err := rt.store.CancelRun(ctx, user, runID)
	if err != nil {
		return db.Run{}, err
	}
	rt.mu.Lock()
	lr := rt.live[runID]
	rt.mu.Unlock()
	if lr != nil {
		lr.stop(StopUser)
	}
	return r, nil
}

// kick starts the thread's next queued run if there is room, and returns it.
func (rt *Runtime) kick(thread int64) (db.Run, bool) {
	rt.mu.Lock()
	closing := rt.closing
	rt.mu.Unlock()
	if closing {
		return db.Run{}, false
	}
	ctx, cancel := context.WithTimeout(rt.ctx, 10*time.Second)
	defer cancel()
	r, ok, err := rt.store.ClaimNextRun(ctx, thread, rt.cfg.Instance, rt.cfg.PerUserRuns)
	if err != nil {
		slog.Error("claim run", "thread", thread, "err", err)
		return db.Run{}, false
	}
	if ok {
		rt.start(r)
	}
	return r, ok
}

// kickQueued tries every thread with queued runs (of one owner, or all).
func (rt *Runtime) kickQueued(ctx context.Context, owner int64) {
	threads, err := rt.store.ThreadsWithQueuedRuns(ctx, owner)
	if err != nil {
		slog.Error("queued runs", "err", err)
		return
	}
	for _, th := range threads {
		rt.kick(th)
	}
}

func (rt *Runtime) start(r db.Run) {
	lr := newLiveRun(r, rt.cfg.MergeWindow, realClock{})
	if r.Continues && r.Kind != db.RouteAgent {
		// Subscribers see the earlier text too; deltas append to it. (Any
		// other run writes its answer anew: its first save drops the
		// stored text.)
		if m, err := rt.store.Message(rt.ctx, r.OwnerID, *r.AssistantMessageID); err == nil {
			lr.continueFrom(m.Content)
		}
	}
	ctx, cancel := context.WithCancel(rt.ctx)
	lr.cancel = cancel
	rt.mu.Lock()
	rt.live[r.ID] = lr
	rt.mu.Unlock()
	rt.progress.add(lr)
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		defer cancel()
		rt.execute(ctx, lr, r)
		// The thread's next queued run, then this user's runs that waited
		// for a free slot.
		rt.kick(r.ThreadID)
		rt.kickQueued(rt.ctx, r.OwnerID)
	}()
}
