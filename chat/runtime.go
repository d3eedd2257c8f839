package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"runtime/debug"
	"sync"
	"time"

	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/internal/usererr"
)

// Store is what the runtime needs from the database.
type Store interface {
	SendMessage(ctx context.Context, user int64, s db.Send) (db.Sent, error)
	RetryAnswer(ctx context.Context, user, assistantMsg int64, kind, model string) (db.Sent, error)
	EditMessage(ctx context.Context, user, message int64, content, kind string) (db.Sent, error)
	ContinueAnswer(ctx context.Context, user, message int64, kind string) (db.Sent, error)
	DeleteMessage(ctx context.Context, user, message int64) (db.DeletedSubtree, error)
	CancelThreadRuns(ctx context.Context, user, thread int64) ([]int64, error)
	DeleteThread(ctx context.Context, user, id int64) ([]string, error)
	Message(ctx context.Context, user, id int64) (db.Message, error)
	ClaimNextRun(ctx context.Context, thread int64, instance string, userCap int) (db.Run, bool, error)
	ThreadsWithQueuedRuns(ctx context.Context, owner int64) ([]int64, error)
	FlushAnswer(ctx context.Context, run, msg int64, content, thinking string) (bool, error)
	FinishRun(ctx context.Context, run, msg int64, f db.Finish) (db.Message, error)
	CancelRun(ctx context.Context, user, id int64) (db.Run, error)
	Thread(ctx context.Context, user, id int64) (db.Thread, error)
	PathTo(ctx context.Context, user, message int64, limit int) ([]db.Message, bool, error)
	SetGeneratedTitle(ctx context.Context, user, id int64, title string) (bool, error)
	ContextSources(ctx context.Context, user, thread int64) (db.ContextSources, error)
	Compactions(ctx context.Context, user, thread int64, under []int64) ([]db.Message, error)
	AddCompaction(ctx context.Context, user, through int64, summary string, meta map[string]any) (db.Message, error)
	Calibration(ctx context.Context, model string) (float64, int, error)
	Calibrate(ctx context.Context, model string, charsPerToken float64) error
	ThreadKBs(ctx context.Context, user, thread int64) ([]db.KnowledgeBase, error)
	SetSources(ctx context.Context, msg int64, sources any) error
	Heartbeat(ctx context.Context, instance string) error
	InterruptOrphanedRuns(ctx context.Context, self string, staleAfter time.Duration) ([]db.Run, error)
	AdoptWaitingRuns(ctx context.Context, self string, own bool, staleAfter time.Duration) ([]db.Run, error)
	ResumeRun(ctx context.Context, user, run int64) (db.Run, error)
	Attachments(ctx context.Context, user int64, msgs []int64) (map[int64][]db.Attachment, error)
	// ReadSnapshot runs fn over one read-only snapshot of the database.
	ReadSnapshot(ctx context.Context, fn func(s *db.DB) error) error
}

// Chatter is the part of the Ollama client that answers.
type Chatter interface {
	Chat(ctx context.Context, req *api.ChatRequest, fn api.ChatResponseFunc) error
}

// Config tunes the runtime.
type Config struct {
	Instance       string        // this process's identity in runs.instance_id
	OllamaHost     string        // shown in error messages
	PerUserRuns    int           // runs of one user that may run at once (default 3)
	FlushEvery     time.Duration // how often partial answers reach the database (default 1s)
	HeartbeatEvery time.Duration // default 5s
	StaleAfter     time.Duration // an instance silent this long is dead (default 20s)
	MaxPath        int           // messages of the path sent to the model (default 10,000)
	// Retriever searches knowledge bases for the rag route (nil: rag
	// answers say that retrieval is unavailable).
	Retriever Retriever
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
	ctx, cancel := context.WithCancel(context.Background())
	return &Runtime{store: store, llm: llm, models: models, cfg: cfg, ctx: ctx, cancel: cancel,
		live: map[int64]*liveRun{}, titles: map[int64]*titleWait{}}
}

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
		lr.stop("shutdown")
	}
	rt.mu.Unlock()
	rt.cancel()
	rt.wg.Wait()
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
// by cancelling its model request (here, or through the database flag that
// the instance running it reads at every flush).
func (rt *Runtime) Cancel(ctx context.Context, user, runID int64) (db.Run, error) {
	r, err := rt.store.CancelRun(ctx, user, runID)
	if err != nil {
		return db.Run{}, err
	}
	rt.mu.Lock()
	lr := rt.live[runID]
	rt.mu.Unlock()
	if lr != nil {
		lr.stop("user")
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
	lr := newLiveRun(r)
	if r.Continues && r.Kind != db.RouteAgent {
		// Subscribers see the earlier text too; deltas append to it.
		if m, err := rt.store.Message(rt.ctx, r.OwnerID, *r.AssistantMessageID); err == nil {
			lr.content.WriteString(m.Content)
		}
	}
	ctx, cancel := context.WithCancel(rt.ctx)
	lr.cancel = cancel
	rt.mu.Lock()
	rt.live[r.ID] = lr
	rt.mu.Unlock()
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

// execute runs one chat run to its end.
func (rt *Runtime) execute(ctx context.Context, lr *liveRun, r db.Run) {
	if r.Kind == db.RouteAgent {
		rt.executeAgent(ctx, lr, r)
		return
	}
	started := time.Now()
	fin := db.Finish{Usage: map[string]any{}}
	var final api.ChatResponse
	done := false
	var chatErr error

	a, thread, chatErr := rt.prepare(ctx, lr, r)
	model := a.Model
	if chatErr == nil && model == "" && a.Direct == "" {
		chatErr = ErrNoModel
	}
	if chatErr == nil && a.Direct != "" {
		// Answered without the model (nothing relevant in the knowledge base).
		lr.append(EventDelta, a.Direct)
		done = true
		fin.Meta = map[string]any{"nothing_found": true}
	} else if chatErr == nil {
		req := &api.ChatRequest{
			Model:    model,
			Messages: a.Messages,
			Stream:   ptr(true),
			Options:  a.Options,
		}
		fin.Usage["num_ctx"] = a.NumCtx
		fin.Usage["estimated_prompt_tokens"] = a.Estimate
		if a.Compacted != nil {
			fin.Usage["compaction_id"] = a.Compacted.ID
		}
		if a.CompactionFailed {
			fin.Usage["compaction_failed"] = true
		}
		lastFlush := time.Now()
		thinkingPhase := false
		chatErr = modelFailure(rt.llm.Chat(ctx, req, func(resp api.ChatResponse) error {
			boundary := false
			if t := resp.Message.Thinking; t != "" {
				lr.append(EventThinking, t)
				thinkingPhase = true
			}
			if c := resp.Message.Content; c != "" {
				boundary = thinkingPhase
				thinkingPhase = false
				lr.append(EventDelta, c)
			}
			if resp.Done {
				done, final = true, resp
				return nil
			}
			if boundary || time.Since(lastFlush) >= rt.cfg.FlushEvery {
				lastFlush = time.Now()
				rt.flush(ctx, lr)
			}
			return nil
		}))
	}

	fin.Content, fin.Thinking = lr.text()
	if a.RAGSources != nil {
		fin.Sources = markCited(a.RAGSources, fin.Content)
	}
	switch {
	case done:
		fin.RunStatus, fin.MsgStatus = db.RunCompleted, db.MsgComplete
		m := final.Metrics
		fin.Usage["prompt_tokens"] = m.PromptEvalCount
		fin.Usage["output_tokens"] = m.EvalCount
		fin.Usage["duration_ms"] = m.TotalDuration.Milliseconds()
		if m.EvalDuration > 0 {
			fin.Usage["tokens_per_second"] = float64(m.EvalCount) / m.EvalDuration.Seconds()
		}
		fin.Usage["done_reason"] = final.DoneReason
		if a.NumCtx > 0 {
			fin.Usage["context_fill"] = float64(m.PromptEvalCount+m.EvalCount) / float64(a.NumCtx)
		}
		if rt.observe(ctx, a, m.PromptEvalCount) {
			fin.Usage["truncated"] = true
		}
	case ctx.Err() != nil && lr.reason() == "user":
		fin.RunStatus, fin.MsgStatus = db.RunCancelled, db.MsgCancelled
	case ctx.Err() != nil:
		fin.RunStatus, fin.MsgStatus = db.RunInterrupted, db.MsgInterrupted
		fin.Error = "The server stopped while this answer was being written."
	default:
		fin.RunStatus, fin.MsgStatus = db.RunFailed, db.MsgError
		fin.Error = rt.describe(chatErr, model)
		if chatErr != nil && !errors.Is(chatErr, ErrNoModel) {
			slog.Warn("run failed", "run", r.ID, "model", model, "err", chatErr)
		}
	}
	fin.Usage["wall_ms"] = time.Since(started).Milliseconds()
	rt.finish(ctx, lr, r, fin)

	// A title comes from the thread's first exchange only: a later answer
	// that finishes while that title is still being written must not
	// replace it with one about its own question.
	if done && thread.TitleState == "provisional" && len(a.Turns) > 0 && firstQuestion(a.Turns) {
		question := lastUserText(a.Turns)
		rt.wg.Add(1)
		go func() {
			defer rt.wg.Done()
			rt.generateTitle(r.OwnerID, thread.ID, model, question, fin.Content)
		}()
	}
}

// finish writes the outcome of a run, even when the run's context was
// cancelled, and tells its watchers.
func (rt *Runtime) finish(ctx context.Context, lr *liveRun, r db.Run, fin db.Finish) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	msg, err := rt.store.FinishRun(wctx, r.ID, lr.msgID, fin)
	if errors.Is(err, db.ErrNotFound) {
		slog.Info("the answer was deleted while being written", "run", r.ID)
	} else if err != nil {
		slog.Error("finish run", "run", r.ID, "err", err)
	}
	if err != nil {
		msg = db.Message{ID: lr.msgID, ThreadID: r.ThreadID, Role: "assistant", Content: fin.Content,
			Status: fin.MsgStatus, Error: fin.Error}
	} else if rt.cfg.Finalized != nil {
		rt.cfg.Finalized(wctx, r.OwnerID, msg)
	}
	lr.end(msg)
	rt.mu.Lock()
	delete(rt.live, r.ID)
	rt.mu.Unlock()
	if err == nil && fin.RunStatus == db.RunCompleted && rt.cfg.Answered != nil {
		rt.cfg.Answered(r.OwnerID, r.ThreadID, lr.msgID)
	}
}

// executeAgent runs an agent run through the AgentRunner and settles it
// like every other run; a run left waiting for its user at shutdown is not
// settled: it stays waiting for the next instance.
func (rt *Runtime) executeAgent(ctx context.Context, lr *liveRun, r db.Run) {
	started := time.Now()
	h := &AgentHost{Run: r, rt: rt, lr: lr}
	var res AgentResult
	if rt.cfg.Agent == nil {
		res.Err = usererr.New("The agent is not available on this server.")
	} else {
		res = rt.cfg.Agent.RunAgent(ctx, h)
	}
	if res.Detached {
		lr.end(db.Message{ID: lr.msgID, ThreadID: r.ThreadID, Role: "assistant", Status: db.MsgStreaming})
		rt.mu.Lock()
		delete(rt.live, r.ID)
		rt.mu.Unlock()
		return
	}
	fin := db.Finish{Usage: res.Usage, Meta: res.Meta}
	if fin.Usage == nil {
		fin.Usage = map[string]any{}
	}
	fin.Content, fin.Thinking = lr.text()
	switch {
	case res.Done:
		fin.RunStatus, fin.MsgStatus = db.RunCompleted, db.MsgComplete
	case ctx.Err() != nil && lr.reason() == "user":
		fin.RunStatus, fin.MsgStatus = db.RunCancelled, db.MsgCancelled
	case ctx.Err() != nil:
		fin.RunStatus, fin.MsgStatus = db.RunInterrupted, db.MsgInterrupted
		fin.Error = "The server stopped while the agent was working. Resume it from its last step."
	default:
		fin.RunStatus, fin.MsgStatus = db.RunFailed, db.MsgError
		fin.Error = rt.describe(res.Err, r.Model)
		if res.Err != nil && !usererr.Is(res.Err) {
			slog.Warn("agent run failed", "run", r.ID, "model", r.Model, "err", res.Err)
		}
	}
	fin.Usage["wall_ms"] = time.Since(started).Milliseconds()
	rt.finish(ctx, lr, r, fin)
}

// prepare assembles the run's request, summarizing older turns first when
// they no longer fit (the run shows "summarizing" meanwhile). A failed
// summary is logged and the request goes out without it: Ollama then
// truncates, and the answer says so.
func (rt *Runtime) prepare(ctx context.Context, lr *liveRun, r db.Run) (Assembly, db.Thread, error) {
	req := ContextRequest{User: r.OwnerID, Thread: r.ThreadID, Leaf: *r.UserMessageID, Model: r.Model}
	if r.Continues {
		// The answer so far is the model's own beginning: it goes on from it.
		partial, err := rt.store.Message(ctx, r.OwnerID, lr.msgID)
		if err != nil {
			return Assembly{}, db.Thread{}, fmt.Errorf("load answer: %w", err)
		}
		req.Partial = &partial
	}
	var sources []db.Source
	if r.Kind == db.RouteRAG {
		kbs, found, direct, err := rt.retrieve(ctx, lr, r, req.Partial)
		if err != nil {
			return Assembly{}, db.Thread{}, err
		}
		if direct != "" {
			a := Assembly{Direct: direct}
			a.Sources.Thread, err = rt.store.Thread(ctx, r.OwnerID, r.ThreadID)
			return a, a.Sources.Thread, err
		}
		if len(kbs) > 0 {
			sources = found
			req.RouteContext = ragContext(kbs, sources)
		}
	}
	a, err := rt.Assemble(ctx, req)
	if err != nil {
		return a, a.Sources.Thread, err
	}
	a.RAGSources = sources
	if a.Model == "" || !a.needsCompaction(rt.cfg.CompactAt) {
		return a, a.Sources.Thread, nil
	}
	turns := a.Turns
	if req.Partial != nil {
		turns = turns[:len(turns)-1]
	}
	keep := int(float64(a.Budget)*keepShare) - a.SystemTokens
	covered := splitForCompaction(turns, keep, a.CharsPerToken)
	if covered == 0 {
		return a, a.Sources.Thread, nil
	}
	lr.setStatus(StatusCompacting)
	defer lr.setStatus(db.RunRunning)
	node, err := rt.compactFor(ctx, r.OwnerID, a, covered, true)
	if err != nil {
		if ctx.Err() != nil {
			return a, a.Sources.Thread, ctx.Err()
		}
		slog.Warn("automatic compaction", "run", r.ID, "err", err)
		a.CompactionFailed = true
		return a, a.Sources.Thread, nil
	}
	b, err := rt.Assemble(ctx, req)
	b.Compacted = &node
	b.RAGSources = sources
	return b, b.Sources.Thread, err
}

// firstQuestion reports whether the message answered is the thread's first
// (a root of the tree).
func firstQuestion(turns []db.Message) bool {
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].Role == "user" {
			return turns[i].ParentID == nil
		}
	}
	return false
}

// lastUserText is the text of the last user message of turns.
func lastUserText(turns []db.Message) string {
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].Role == "user" {
			return turns[i].Content
		}
	}
	return ""
}

// flush saves the partial answer; a stop requested through the database
// (from another instance) cancels the run here.
func (rt *Runtime) flush(ctx context.Context, lr *liveRun) {
	content, thinking := lr.text()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	stop, err := rt.store.FlushAnswer(wctx, lr.id, lr.msgID, content, thinking)
	if err != nil {
		slog.Warn("flush answer", "run", lr.id, "err", err)
		return
	}
	if stop {
		lr.stop("user")
	}
}

// ModelError is a failure that the model server's client returned (not
// the database's, not Weft's): the runtime describes it by its type, and a
// mid-stream error is the model server's own words, quoted as untrusted
// text.
type ModelError struct{ Err error }

func (e *ModelError) Error() string { return e.Err.Error() }
func (e *ModelError) Unwrap() error { return e.Err }

// modelFailure marks err, returned by the model client, as the model
// server's.
func modelFailure(err error) error {
	if err == nil {
		return nil
	}
	return &ModelError{Err: err}
}

// ErrNoModel is returned when a thread has no model to answer with.
var ErrNoModel = errors.New("no model")

// describe turns a run's failure into a message for the user: what
// happened and what to do, without internals. An error that carries its
// own message (usererr) says it; a failure of the model server is named by
// its type; anything else (the database, a file, a bug) is a generic
// message, its text only in the log.
func (rt *Runtime) describe(err error, model string) string {
	var se api.StatusError
	var ue *url.Error
	var ne net.Error
	var me *ModelError
	if msg, ok := usererr.Message(err); ok {
		return msg
	}
	switch {
	case err == nil:
		return "The model server ended the answer before it was complete."
	case errors.Is(err, ErrNoModel):
		return "No model is chosen for this thread. Pick one in the composer and retry."
	case errors.As(err, &se) && se.StatusCode == 404:
		return fmt.Sprintf("Model %q is not available on the Ollama server at %s. Pull it with `ollama pull %s` or choose another model.", model, rt.cfg.OllamaHost, model)
	case errors.As(err, &se):
		// Ollama's own words about the model help (a model that cannot
		// chat, a context too long); they are another server's text, so
		// they are quoted cleaned and short.
		if msg := usererr.Untrusted(se.ErrorMessage, maxServerMessage); msg != "" {
			return "The model server refused the request: " + msg
		}
		return fmt.Sprintf("The model server refused the request (HTTP %d).", se.StatusCode)
	case errors.As(err, &ue), errors.As(err, &ne):
		return fmt.Sprintf("Ollama is not reachable at %s. Start it with `ollama serve`, or set OLLAMA_HOST to where it runs, then retry.", rt.cfg.OllamaHost)
	case errors.As(err, &me) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		// An error line in the stream: the model server's words.
		if msg := usererr.Untrusted(me.Err.Error(), maxServerMessage); msg != "" {
			return "The model stopped with an error: " + msg
		}
		return GenericFailure
	default:
		return GenericFailure
	}
}

// GenericFailure is what a user is told about a failure that carries no
// message of its own; its details are in the server log.
const GenericFailure = "The answer failed because of an error on the server; the server log has the details. Retry in a moment."

// maxServerMessage caps the model server's error text quoted to the user.
const maxServerMessage = 300

func toAPIMessages(path []db.Message) []api.Message {
	out := make([]api.Message, 0, len(path))
	for _, m := range path {
		if m.Role == "assistant" && m.Content == "" {
			continue // an answer that never got text says nothing to the model
		}
		out = append(out, api.Message{Role: m.Role, Content: m.Content})
	}
	return out
}

func ptr[T any](v T) *T { return &v }
