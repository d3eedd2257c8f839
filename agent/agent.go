package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"weft/chat"
	"weft/db"
	"weft/internal/usererr"
	"weft/rag"
)

// Store is what the agent needs from the database.
type Store interface {
	AddStep(ctx context.Context, run int64, kind, status string, data db.StepData, checkpoint any) (db.Step, error)
	UpdateStep(ctx context.Context, step int64, status string, data db.StepData, checkpoint any) (db.Step, error)
	StepByID(ctx context.Context, run, id int64) (db.Step, error)
	SettlePending(ctx context.Context, run int64, status string) error
	SetRunWaiting(ctx context.Context, run int64, waiting bool) (bool, error)
	CancelRequested(ctx context.Context, run int64) (bool, error)
	Checkpoint(ctx context.Context, run int64) (json.RawMessage, error)
	Thread(ctx context.Context, user, id int64) (db.Thread, error)
	Workspace(ctx context.Context, user, id int64) (db.Workspace, error)
	ToolPolicies(ctx context.Context, user, workspace int64) (map[string]db.ToolPolicy, error)
	ThreadGrants(ctx context.Context, user, thread int64) (map[string]bool, error)
	ThreadKBs(ctx context.Context, user, thread int64) ([]db.KnowledgeBase, error)
	Decide(ctx context.Context, user, step int64, decision string) (db.Step, error)
	Answer(ctx context.Context, user, step int64, answers []string) (db.Step, error)
	TimeoutQuestion(ctx context.Context, step int64, answers []string) (db.Step, error)
	// Lifecycle hooks.
	WorkspaceHooks(ctx context.Context, user, workspace int64) ([]db.WorkspaceHook, error)
	WorkspaceHookByID(ctx context.Context, id int64) (db.WorkspaceHook, error)
	AddHookDeliveries(ctx context.Context, ds []db.HookDelivery, enqueue func(tx pgx.Tx, d db.HookDelivery) error) error
	HookDeliveryByID(ctx context.Context, id int64) (db.HookDelivery, error)
	HookAttempted(ctx context.Context, id int64, delivered, givenUp bool, errText string, step int64) (db.HookDelivery, error)
	UnreportedHookFailures(ctx context.Context, run int64, quiet []string) ([]db.HookDelivery, error)
	SetHookDeliveryStep(ctx context.Context, id, step int64) error
	RunEnded(ctx context.Context, run int64) (bool, error)
	PruneHookDeliveries(ctx context.Context, before time.Time) (int64, error)
}

// Searcher searches knowledge bases with the acting user's authorization
// (implemented by rag.Service).
type Searcher interface {
	Search(ctx context.Context, q rag.Query) ([]rag.Result, error)
}

// Config tunes the agent.
type Config struct {
	DataDir         string        // workspaces live in DataDir/workspaces/<id> unless their root is set
	QuestionTimeout time.Duration // unanswered questions take the recommended option (default 3 min)
	ToolTimeout     time.Duration // one tool call (default 60 s)
	PollEvery       time.Duration // how often a waiting run looks at the database (default 1 s)
	// Hooks are the lifecycle hooks (the administrator's, and how
	// workspaces' are delivered).
	Hooks HooksConfig
	// Jobs is the job queue hook deliveries are made from (nil: only
	// tool_execution_start, which is waited for, is delivered). The
	// queue must work HookQueue and WorkspaceHookQueue.
	Jobs Jobs
	// Sub-agents: model rounds (default 10, at most the workspace's step
	// limit) and time (default 5 min) each may spend, and how many of one
	// delegate_parallel call work at once (default 2).
	SubagentRounds      int
	SubagentTime        time.Duration
	SubagentConcurrency int
}

// Agent runs the tool loop of agent runs.
type Agent struct {
	store  Store
	search Searcher
	fetch  func(ctx context.Context, url string) (FetchResult, error)
	cfg    Config
	tools  []Tool // the built-ins
	byName map[string]Tool

	provMu    sync.RWMutex
	providers []Provider

	hooks *hooks // lifecycle hooks: the administrator's, the sender, the outbox

	mu    sync.Mutex
	wakes map[int64]chan struct{} // per run: a decision arrived here
}

// New returns an agent with the built-in tools. search may be nil (no
// knowledge-base search); fetch may be nil (web fetch unavailable).
func New(store Store, search Searcher, fetch func(ctx context.Context, url string) (FetchResult, error), cfg Config) *Agent {
	if cfg.QuestionTimeout <= 0 {
		cfg.QuestionTimeout = 3 * time.Minute
	}
	if cfg.ToolTimeout <= 0 {
		cfg.ToolTimeout = 60 * time.Second
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = time.Second
	}
	if cfg.SubagentRounds <= 0 {
		cfg.SubagentRounds = 10
	}
	if cfg.SubagentTime <= 0 {
		cfg.SubagentTime = 5 * time.Minute
	}
	if cfg.SubagentConcurrency <= 0 {
		cfg.SubagentConcurrency = 2
	}
	a := &Agent{store: store, search: search, fetch: fetch, cfg: cfg, byName: map[string]Tool{}, wakes: map[int64]chan struct{}{}}
	a.tools = BuiltinTools()
	if _, ok := store.(subStore); !ok {
		for i, t := range a.tools {
			if db.IsDelegation(t.Name) {
				a.tools[i].Unavailable = "Sub-agents are not available on this server."
			}
		}
	}
	for _, t := range a.tools {
		a.byName[t.Name] = t
	}
	a.hooks = newHooks(store, cfg)
	return a
}

// newHooks builds the agent's hooks and registers their job on cfg.Jobs.
func newHooks(store Store, cfg Config) *hooks {
	hc := cfg.Hooks.withDefaults()
	h := &hooks{cfg: hc, send: newSender(hc), store: store, jobs: cfg.Jobs}
	for _, hk := range hc.Hooks {
		h.admin = append(h.admin, adminTarget(hk, hc.Timeout))
	}
	if cfg.Jobs != nil {
		err := cfg.Jobs.Register(func(w *river.Workers) error {
			if err := river.AddWorkerSafely(w, &hookWorker{h: h}); err != nil {
				return err
			}
			return river.AddWorkerSafely(w, &hookPruneWorker{h: h})
		}, pruneEvery())
		if err != nil {
			// Only a programming error (a second agent on one queue, or
			// a queue already started) gets here.
			panic(fmt.Sprintf("agent: register the hook deliveries: %v", err))
		}
	}
	return h
}

// BuiltinTools lists every built-in tool, in the order they are shown.
func BuiltinTools() []Tool {
	var out []Tool
	out = append(out, FileTools()...)
	out = append(out, kbTool(), askTool())
	out = append(out, WebTools()...)
	out = append(out, delegateTools()...)
	return out
}

// Provider offers tools beside the built-ins: an MCP server's, the
// sandboxed shell, skills. Its tools are under the same governance as the
// built-ins: workspace rules, approvals, the one "why unavailable"
// projection, the trace and the debug view.
type Provider interface {
	// Tools lists the provider's tools as they are now; a tool that cannot
	// run (its server is down, it was removed, the sandbox is missing) is
	// listed with Unavailable set, so that every page says why. It must
	// not block: it answers from what the provider already knows.
	Tools() []Tool
}

// Prompter is a Provider that adds to the agent's execution context (the
// skills list). Its text is assembled per request, in the system message,
// and never stored in the run's history, so resuming or compacting a run
// never duplicates it.
type Prompter interface {
	Prompt(ctx context.Context, env *Env) string
}

// AddProvider adds a provider of tools; a name already taken (by a
// built-in or an earlier provider) keeps its first owner.
func (a *Agent) AddProvider(p Provider) {
	a.provMu.Lock()
	defer a.provMu.Unlock()
	a.providers = append(a.providers, p)
}

// Tools lists the agent's tools now: the built-ins, then every provider's.
func (a *Agent) Tools() []Tool {
	a.provMu.RLock()
	provs := a.providers
	a.provMu.RUnlock()
	if len(provs) == 0 {
		return a.tools
	}
	out := append([]Tool(nil), a.tools...)
	seen := make(map[string]bool, len(out))
	for _, t := range out {
		seen[t.Name] = true
	}
	for _, p := range provs {
		for _, t := range p.Tools() {
			if t.Name == "" || seen[t.Name] {
				continue
			}
			seen[t.Name] = true
			out = append(out, t)
		}
	}
	return out
}

// tool finds a tool by name among Tools.
func (a *Agent) tool(name string) (Tool, bool) {
	if t, ok := a.byName[name]; ok {
		return t, true
	}
	for _, t := range a.Tools() {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// canonical is the name of the tool a call means: its own when a tool
// has it, else the one provided tool named SERVER__name (an MCP tool
// called by the server's own tool name, as other MCP clients name them
// and small models often write them); a name that matches none, or
// several, stays as it is (and is refused as unknown).
func (a *Agent) canonical(name string) string {
	if _, ok := a.tool(name); ok || name == "" {
		return name
	}
	found := ""
	for _, t := range a.Tools() {
		if strings.HasSuffix(t.Name, "__"+name) {
			if found != "" {
				return name
			}
			found = t.Name
		}
	}
	if found == "" {
		return name
	}
	return found
}

// prompts is what the providers add to the execution context.
func (a *Agent) prompts(ctx context.Context, env *Env) []string {
	a.provMu.RLock()
	provs := a.providers
	a.provMu.RUnlock()
	var out []string
	for _, p := range provs {
		if pr, ok := p.(Prompter); ok {
			if s := pr.Prompt(ctx, env); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// Root returns a workspace's folder (not created).
func (a *Agent) Root(ws db.Workspace) string {
	if ws.RootPath != "" {
		return ws.RootPath
	}
	return filepath.Join(a.cfg.DataDir, "workspaces", strconv.FormatInt(ws.ID, 10))
}

type finalAnswer struct {
	Content string `json:"content"`
}

// pendingCall is a tool call of the current round that has not finished.
type pendingCall struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Args     json.RawMessage `json:"args"`
	Step     int64           `json:"step,omitempty"`     // its tool_call step, once recorded
	Approval int64           `json:"approval,omitempty"` // its approval step, once asked
	Question int64           `json:"question,omitempty"` // its question step (ask_user)
	// Started: a tool that changes the workspace was started. A resumed run
	// finding it set does not run the call again: it may have taken effect
	// before the server stopped.
	Started bool `json:"started,omitempty"`
}

// run is one agent run being executed.
type run struct {
	a      *Agent
	h      *chat.AgentHost
	r      db.Run
	thread db.Thread
	ws     db.Workspace
	env    *Env
	cp     checkpoint
	max    int
	hk     *runHooks // its lifecycle hooks (set by load)
	// waiting: the run shows as waiting for its user (in the database and
	// to its watchers); an adopted run starts so.
	waiting bool
	// sub is set on a sub-agent's run: its task, tools and budget.
	sub *db.Subagent
	// effected: a call that may change something was started (a child's
	// parent then never delegates it again on resume); called lists the
	// tools called, for a child's evidence summary.
	effected bool
	called   []string
	budget   *budget // a sub-agent's time budget (paused while it waits)
}

// RunAgent executes (or resumes) an agent run.
func (a *Agent) RunAgent(ctx context.Context, h *chat.AgentHost) chat.AgentResult {
	x := &run{a: a, h: h, r: h.Run, waiting: h.Run.Status == db.RunWaiting}
	if h.Run.CancelRequested {
		// Stopped while no instance ran it (an adopted waiting run): its
		// approval may have been given meanwhile too, but nothing runs.
		h.StopUser()
	}
	stopWatch := x.watchStop(ctx)
	res := x.loop(ctx)
	stopWatch()
	if res.Detached {
		return res
	}
	if ctx.Err() != nil && h.StopReason() == chat.StopShutdown && x.waitingForUser(ctx) {
		// Stays waiting: the next instance adopts it.
		res.Detached = true
		return res
	}
	if res.Err != nil && ctx.Err() == nil {
		res.Err = x.shown(res.Err)
	}
	// Nothing left can be answered or finish: a pending approval or question
	// (Stop, a failure, or an approval its tool no longer needs once the
	// workspace's rule changed) and a call that did not finish are settled
	// as cancelled.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	if err := a.store.SettlePending(wctx, x.r.ID, db.StepCancelled); err != nil {
		slog.Warn("settle pending steps", "run", x.r.ID, "err", err)
	}
	if st, ok := a.store.(subStore); ok {
		// A sub-agent whose result could not be recorded ends with it.
		status := db.RunCancelled
		if ctx.Err() != nil && h.StopReason() == chat.StopShutdown {
			status = db.RunInterrupted
		}
		if err := st.EndSubRuns(wctx, x.r.ID, status); err != nil {
			slog.Warn("end sub-agents", "run", x.r.ID, "err", err)
		}
	}
	cancel()
	x.agentEnd(ctx, x.endStatus(ctx, res), chatResult{err: res.Err, usage: res.Usage})
	h.Stepped()
	return res
}

// endStatus is the run's outcome as agent_end reports it.
func (x *run) endStatus(ctx context.Context, res chat.AgentResult) string {
	switch {
	case res.Done:
		return db.RunCompleted
	case ctx.Err() != nil && x.h.StopReason() == chat.StopShutdown:
		return db.RunInterrupted
	case ctx.Err() != nil || x.h.StopReason() == chat.StopUser:
		return db.RunCancelled
	}
	return db.RunFailed
}

// shown is what the user is told about why the run failed: the agent's own
// messages and the model server's failures as they are, anything else (the
// database, a broken checkpoint) in general words; its text is logged.
func (x *run) shown(err error) error {
	var me *chat.ModelError
	if usererr.Is(err) || errors.Is(err, chat.ErrNoModel) || errors.As(err, &me) {
		return err
	}
	slog.Error("agent run failed", "run", x.r.ID, "model", x.r.Model, "err", err)
	return usererr.New("The agent stopped because of an error on the server. Its steps so far are kept above; retry to run it again.")
}

// watchStop stops the run when a stop is requested through the database
// (Stop pressed on another instance), whatever the run is doing: a model
// turn, a tool call or a wait. The returned func ends the watch.
func (x *run) watchStop(ctx context.Context) func() {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(x.a.cfg.PollEvery)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			if stop, err := x.a.store.CancelRequested(wctx, x.r.ID); err == nil && stop {
				x.h.StopUser()
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// running shows the run as running again after it waited for its user.
func (x *run) running(ctx context.Context) {
	if !x.waiting || ctx.Err() != nil {
		return
	}
	if _, err := x.a.store.SetRunWaiting(context.WithoutCancel(ctx), x.r.ID, false); err != nil {
		slog.Warn("run waiting", "run", x.r.ID, "err", err)
		return
	}
	x.waiting = false
	x.h.SetStatus(db.RunRunning)
}

// waitingForUser reports whether the run has a pending approval or question.
func (x *run) waitingForUser(ctx context.Context) bool {
	for _, p := range x.cp.Pending {
		if p.Approval != 0 || p.Question != 0 {
			id := p.Approval
			if id == 0 {
				id = p.Question
			}
			s, err := x.a.store.StepByID(context.WithoutCancel(ctx), x.r.ID, id)
			if err == nil && s.Status == db.StepPending {
				return true
			}
		}
	}
	return false
}

func (x *run) result(done bool, err error) chat.AgentResult {
	ev := &db.Evidence{Rounds: x.cp.Round, Changes: x.cp.Changes, Sources: x.cp.Sources}
	var usage db.Usage
	if t := x.cp.Usage; t != nil {
		usage = db.Usage{PromptTokens: t.Prompt, OutputTokens: t.Output, Counted: true}
	}
	return chat.AgentResult{Done: done, Err: err, Evidence: ev, Usage: usage}
}

// Wake tells a run waiting on this instance that one of its steps was
// settled.
func (a *Agent) Wake(run int64) {
	a.mu.Lock()
	ch := a.wakes[run]
	a.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (a *Agent) wakeChan(run int64) (<-chan struct{}, func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan struct{}, 1)
	a.wakes[run] = ch
	return ch, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.wakes[run] == ch {
			delete(a.wakes, run)
		}
	}
}

// Decide settles one of the user's approvals and wakes its run.
func (a *Agent) Decide(ctx context.Context, user, step int64, decision string) (db.Step, error) {
	switch decision {
	case db.DecideOnce, db.DecideThread, db.DecideAlways, db.DecideDeny:
	default:
		return db.Step{}, ErrBadDecision
	}
	s, err := a.store.Decide(ctx, user, step, decision)
	if err == nil {
		a.Wake(s.RunID)
	}
	return s, err
}

// ErrBadDecision is an approval decision that is not once, thread, always
// or deny.
var ErrBadDecision = errors.New("the decision must be once, thread, always or deny")
