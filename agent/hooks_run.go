// Lifecycle hooks in a run: the payloads, the one waited-for event
// (tool_execution_start), the outbox for the others, and the trace steps
// that show failures and denials.

package agent

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"weft/db"
)

// HookPayload is one delivery's JSON body.
type HookPayload struct {
	ID          string    `json:"id"` // the event's id: the same on every attempt
	Event       string    `json:"event"`
	Time        time.Time `json:"time"`
	RunID       int64     `json:"run_id"`
	ThreadID    int64     `json:"thread_id"`
	WorkspaceID int64     `json:"workspace_id"`
	UserID      int64     `json:"user_id"`
	Model       string    `json:"model,omitempty"`
	// Resumed (agent_start): the run goes on from a checkpoint (after a
	// restart, an adoption or Resume), so earlier events were sent before.
	Resumed bool `json:"resumed,omitempty"`
	Turn    int  `json:"turn,omitempty"` // the model turn (1, 2, …) of turn, message and tool events
	// Tool events.
	Tool      string          `json:"tool,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Progress  string          `json:"progress,omitempty"` // tool_execution_update: the tool's report
	Result    *HookResult     `json:"result,omitempty"`   // tool_execution_end
	// Message events: the model's answer of this turn.
	Message *HookMessage `json:"message,omitempty"`
	// Usage: of the turn (message_end, turn_end) or the run (agent_end).
	Usage *HookUsage `json:"usage,omitempty"`
	// agent_end: completed, failed, cancelled or interrupted, and why.
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

// HookResult is a tool call's outcome.
type HookResult struct {
	Status  string          `json:"status"` // ok, error or refused
	Output  string          `json:"output,omitempty"`
	Error   string          `json:"error,omitempty"`
	Reason  string          `json:"reason,omitempty"`
	Changes []db.FileChange `json:"changes,omitempty"`
}

// HookMessage is the model's message of a turn. message_update carries
// only Delta, the text since the previous update (so a long answer costs
// its length once, not once per update); message_end the whole message
// and its tool calls.
type HookMessage struct {
	Role      string        `json:"role"`
	Content   string        `json:"content,omitempty"`
	Delta     string        `json:"delta,omitempty"`
	Thinking  string        `json:"thinking,omitempty"`
	ToolCalls []db.StepCall `json:"tool_calls,omitempty"`
}

// HookUsage counts tokens.
type HookUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// hookMaxOutput caps a tool's output in a payload.
const hookMaxOutput = 16 << 10

// updateEvery is the throttle of message_update and tool_execution_update:
// the first goes at once, the next no sooner than a second later.
const updateEvery = time.Second

// runHooks is a run's receivers and the state of its throttles.
type runHooks struct {
	targets []target
	turn    int // the open turn (0: none)

	msgLast  time.Time
	msgDelta strings.Builder

	mu       sync.Mutex // the tool's progress may come from any goroutine
	toolLast time.Time
	toolCall *pendingCall
	started  map[int64]bool // tool_call steps whose tool_execution_start went out
}

// loadHooks finds the run's receivers: the administrator's and its
// workspace's.
func (x *run) loadHooks(ctx context.Context) error {
	x.hk = &runHooks{started: map[int64]bool{}}
	if x.a.hooks == nil {
		return nil
	}
	x.hk.targets = append(x.hk.targets, x.a.hooks.admin...)
	ws, err := x.a.store.WorkspaceHooks(ctx, x.r.OwnerID, x.ws.ID)
	if err != nil {
		return fmt.Errorf("workspace hooks: %w", err)
	}
	for _, h := range ws {
		x.hk.targets = append(x.hk.targets, workspaceTarget(h))
	}
	return nil
}

func workspaceTarget(h db.WorkspaceHook) target {
	return target{key: fmt.Sprintf("workspace:%d", h.ID), event: h.Event, url: h.URL, secret: h.Secret,
		timeout: time.Duration(h.TimeoutMS) * time.Millisecond, wsHook: h.ID, ws: h.WorkspaceID}
}

func (x *run) hooked(event string) bool {
	if x.hk == nil {
		return false
	}
	for _, t := range x.hk.targets {
		if t.takes(event) {
			return true
		}
	}
	return false
}

// payload is an event of this run with a new id.
func (x *run) payload(event string) HookPayload {
	return HookPayload{ID: "evt_" + strings.ToLower(rand.Text()), Event: event, Time: time.Now().UTC(),
		RunID: x.r.ID, ThreadID: x.r.ThreadID, WorkspaceID: x.ws.ID, UserID: x.r.OwnerID, Model: x.r.Model, Turn: x.hk.turn}
}

// emit puts an event in the outbox for every hook that takes it; the job
// delivers it. It never waits on a receiver, and a failure to queue it is
// logged, never the run's.
func (x *run) emit(ctx context.Context, p HookPayload) {
	ds := x.deliveries(p)
	if len(ds) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := x.a.hooks.enqueue(wctx, ds, 0); err != nil {
		slog.Warn("queue hook deliveries", "run", x.r.ID, "event", p.Event, "err", err)
	}
}

// deliveries are an event's for every hook that takes it (none when no
// hook does, or there is no job queue to deliver them).
func (x *run) deliveries(p HookPayload) []db.HookDelivery {
	if !x.hooked(p.Event) || x.a.hooks.jobs == nil {
		return nil
	}
	body, err := json.Marshal(p)
	if err != nil {
		slog.Warn("hook payload", "run", x.r.ID, "err", err)
		return nil
	}
	var ds []db.HookDelivery
	for _, t := range x.hk.targets {
		if t.takes(p.Event) {
			ds = append(ds, x.delivery(t, p, body))
		}
	}
	return ds
}

// withDeliveries is the checkpoint to save with a step, with ds put in
// the outbox in the same transaction.
func (x *run) withDeliveries(ds []db.HookDelivery) any {
	if len(ds) == 0 {
		return x.cp
	}
	return db.WithDeliveries{Checkpoint: x.cp, Deliveries: ds, Enqueue: x.a.hooks.insertJob(context.Background(), 0)}
}

func (x *run) delivery(t target, p HookPayload, body []byte) db.HookDelivery {
	d := db.HookDelivery{EventID: p.ID, Event: p.Event, RunID: &x.r.ID, HookKey: t.key, Body: string(body)}
	if t.wsHook != 0 {
		d.WorkspaceHookID = &t.wsHook
	}
	return d
}

// hookCheck delivers tool_execution_start to its hooks and waits for their
// answers (each within its timeout): the first that denies stops the call.
// A hook that fails or does not answer in time lets the call go ahead
// (fail-open): its failure is a step of the trace, and the delivery is
// retried from the outbox.
func (x *run) hookCheck(ctx context.Context, s db.Step, p HookPayload) (denied bool, reason string) {
	var ts []target
	for _, t := range x.hk.targets {
		if t.takes(p.Event) {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return false, ""
	}
	body, err := json.Marshal(p)
	if err != nil {
		return false, ""
	}
	type outcome struct {
		answer []byte
		err    error
		took   time.Duration
	}
	outs := make([]outcome, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Go(func() {
			start := time.Now()
			a, err := x.a.hooks.send.send(ctx, t, p.Event, p.ID, body)
			outs[i] = outcome{a, err, time.Since(start)}
		})
	}
	wg.Wait()
	var retry []db.HookDelivery
	for i, t := range ts {
		o := outs[i]
		data := db.StepData{Content: p.Event, Output: t.label(), Tool: p.Tool, CallStep: s.ID, DurationMS: o.took.Milliseconds()}
		switch {
		case o.err != nil:
			if ctx.Err() != nil {
				return false, ""
			}
			data.Error = "This hook failed: " + o.err.Error() + ". The call went ahead without its answer."
			step, err := x.addStep(ctx, db.StepHook, db.StepError, data)
			if err != nil {
				slog.Warn("record hook failure", "run", x.r.ID, "err", err)
			}
			d := x.delivery(t, p, body)
			d.Attempts, d.LastError = 1, o.err.Error()
			if step.ID != 0 {
				d.StepID = &step.ID
			}
			retry = append(retry, d)
		case !denied:
			if no, why := denial(o.answer); no {
				denied, reason = true, why
				data.Reason = why
				if _, err := x.addStep(ctx, db.StepHook, db.StepRefused, data); err != nil {
					slog.Warn("record hook denial", "run", x.r.ID, "err", err)
				}
			}
		}
	}
	if len(retry) > 0 {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := x.a.hooks.enqueue(wctx, retry, x.a.hooks.cfg.RetryBackoff); err != nil {
			slog.Warn("queue hook retries", "run", x.r.ID, "err", err)
		}
		cancel()
	}
	return denied, reason
}

// callArgs is a call's arguments as a JSON object.
func callArgs(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}")
	}
	return raw
}

// toolStart emits tool_execution_start for the first pending call and
// waits for its hooks; denied stops the call with reason.
func (x *run) toolStart(ctx context.Context, s db.Step) (denied bool, reason string) {
	if !x.hooked(EventToolExecutionStart) {
		x.hk.started[s.ID] = true
		return false, ""
	}
	p := x.cp.Pending[0]
	ev := x.payload(EventToolExecutionStart)
	ev.Tool, ev.CallID, ev.Arguments = p.Name, p.ID, callArgs(p.Args)
	x.hk.started[s.ID] = true
	return x.hookCheck(ctx, s, ev)
}

// toolProgress is Env.Progress while a call runs: tool_execution_update,
// throttled.
func (x *run) toolProgress(ctx context.Context) func(text string) {
	return func(text string) {
		x.hk.mu.Lock()
		p := x.hk.toolCall
		if p == nil || time.Since(x.hk.toolLast) < updateEvery || !x.hooked(EventToolExecutionUpdate) {
			x.hk.mu.Unlock()
			return
		}
		x.hk.toolLast = time.Now()
		ev := x.payload(EventToolExecutionUpdate)
		ev.Tool, ev.CallID, ev.Arguments, ev.Progress = p.Name, p.ID, callArgs(p.Args), cutText(text, hookMaxOutput)
		x.hk.mu.Unlock()
		x.emit(ctx, ev)
	}
}

// toolRunning marks the call whose progress tool_execution_update reports
// (nil: none).
func (x *run) toolRunning(p *pendingCall) {
	x.hk.mu.Lock()
	x.hk.toolCall, x.hk.toolLast = p, time.Time{}
	x.hk.mu.Unlock()
}

// toolEnd is the deliveries of tool_execution_end for a call whose start
// went out, to record with the call's result (finishCall).
func (x *run) toolEnd(s db.Step, p pendingCall, status string, res Result, errText, reason string) []db.HookDelivery {
	if !x.hk.started[s.ID] && !p.Started {
		return nil
	}
	delete(x.hk.started, s.ID)
	if !x.hooked(EventToolExecutionEnd) {
		return nil
	}
	ev := x.payload(EventToolExecutionEnd)
	ev.Tool, ev.CallID, ev.Arguments = p.Name, p.ID, callArgs(p.Args)
	ev.Result = &HookResult{Status: status, Output: cutText(res.Output, hookMaxOutput), Error: errText, Reason: reason}
	if status == db.StepOK {
		ev.Result.Changes = res.Changes
	}
	return x.deliveries(ev)
}

// turnStart opens a model turn: turn_start and message_start.
func (x *run) turnStart(ctx context.Context) {
	x.hk.turn = x.cp.Round + 1
	x.emit(ctx, x.payload(EventTurnStart))
	ev := x.payload(EventMessageStart)
	ev.Message = &HookMessage{Role: db.RoleAssistant}
	x.emit(ctx, ev)
	x.hk.msgLast = time.Time{}
	x.hk.msgDelta.Reset()
}

// messageChunk is a streamed piece of the model's answer: message_update,
// throttled (the first at once, then at most one a second, each with the
// text since the previous one).
func (x *run) messageChunk(ctx context.Context, text string) {
	if text == "" || !x.hooked(EventMessageUpdate) {
		return
	}
	x.hk.msgDelta.WriteString(text)
	if time.Since(x.hk.msgLast) < updateEvery {
		return
	}
	x.hk.msgLast = time.Now()
	ev := x.payload(EventMessageUpdate)
	ev.Message = &HookMessage{Role: db.RoleAssistant, Delta: x.hk.msgDelta.String()}
	x.hk.msgDelta.Reset()
	x.emit(ctx, ev)
}

// messageEnd emits message_end with the whole message, and turn_end when
// the turn called no tool.
func (x *run) messageEnd(ctx context.Context, data db.StepData) {
	ev := x.payload(EventMessageEnd)
	ev.Message = &HookMessage{Role: db.RoleAssistant, Content: data.Content, Thinking: data.Thinking, ToolCalls: data.Calls}
	ev.Usage = &HookUsage{PromptTokens: data.PromptTokens, OutputTokens: data.OutputTokens}
	x.emit(ctx, ev)
	if len(data.Calls) == 0 {
		x.turnEnd(ctx)
	}
}

// turnEnd closes the open turn (its tool calls all finished) and shows the
// failures of deliveries made meanwhile in the trace.
func (x *run) turnEnd(ctx context.Context) {
	if x.hk.turn == 0 {
		return
	}
	x.emit(ctx, x.payload(EventTurnEnd))
	x.hk.turn = 0
	x.reportHookFailures(ctx)
}

// quietEvents are the events whose failed deliveries the trace does not
// show: the throttled updates, one a second while a model streams or a
// tool runs — a receiver that is down would add a step a second. Their
// hook's failures show in the other events' steps; their deliveries are
// retried all the same.
var quietEvents = []string{EventMessageUpdate, EventToolExecutionUpdate}

// reportHookFailures adds a trace step for each of the run's failed
// deliveries not yet shown (the job updates it as it retries). Only the
// run adds steps while it is active, so steps stay in one order.
func (x *run) reportHookFailures(ctx context.Context) {
	if len(x.hk.targets) == 0 {
		return
	}
	wctx := context.WithoutCancel(ctx)
	fails, err := x.a.store.UnreportedHookFailures(wctx, x.r.ID, quietEvents)
	if err != nil {
		slog.Warn("hook failures", "run", x.r.ID, "err", err)
		return
	}
	for _, d := range fails {
		label := d.HookKey
		for _, t := range x.hk.targets {
			if t.key == d.HookKey {
				label = t.label()
			}
		}
		s, err := x.addStep(ctx, db.StepHook, db.StepError, failureData(d, label))
		if err != nil {
			slog.Warn("record hook failure", "run", x.r.ID, "err", err)
			return
		}
		if err := x.a.store.SetHookDeliveryStep(wctx, d.ID, s.ID); err != nil {
			slog.Warn("record hook failure", "run", x.r.ID, "err", err)
		}
	}
}

// agentStart emits agent_start; resumed when the run goes on from a
// checkpoint.
func (x *run) agentStart(ctx context.Context, resumed bool) {
	ev := x.payload(EventAgentStart)
	ev.Resumed = resumed
	x.emit(ctx, ev)
}

// agentEnd emits agent_end with the run's outcome and usage.
func (x *run) agentEnd(ctx context.Context, status string, res chatResult) {
	if x.hk == nil {
		return
	}
	if x.hk.turn != 0 {
		x.turnEnd(ctx)
	} else {
		x.reportHookFailures(ctx)
	}
	ev := x.payload(EventAgentEnd)
	ev.Status = status
	if res.err != nil && status == db.RunFailed {
		ev.Error = res.err.Error()
	}
	if res.usage.Counted {
		ev.Usage = &HookUsage{PromptTokens: res.usage.PromptTokens, OutputTokens: res.usage.OutputTokens}
	}
	x.emit(ctx, ev)
}

// chatResult is what agent_end reports of a run's result.
type chatResult struct {
	err   error
	usage db.Usage
}

// hooks is the agent's part of lifecycle hooks: the administrator's
// hooks, the sender and the outbox.
type hooks struct {
	cfg   HooksConfig
	admin []target
	send  *sender
	store Store
	jobs  Jobs

	mu    sync.Mutex
	slots map[int64]chan struct{} // per workspace: its deliveries being made by this instance's job
}

// wsInFlight is how many deliveries of one workspace's hooks this
// instance's job makes at once; another waits up to wsWait for its turn,
// then fails (and is retried with the backoff), so that a receiver that
// never answers holds at most this many of the queue's workers, and
// other workspaces' hooks go on. A burst of events to a receiver that
// answers (several a second) waits its turn without failing.
const (
	wsInFlight = 2
	wsWait     = 2 * time.Second
)

// take waits for a slot of workspace ws (false: none came within wsWait,
// or ctx ended); release gives it back.
func (h *hooks) take(ctx context.Context, ws int64) (release func(), ok bool) {
	h.mu.Lock()
	if h.slots == nil {
		h.slots = map[int64]chan struct{}{}
	}
	c := h.slots[ws]
	if c == nil {
		c = make(chan struct{}, wsInFlight)
		h.slots[ws] = c
	}
	h.mu.Unlock()
	t := time.NewTimer(wsWait)
	defer t.Stop()
	select {
	case c <- struct{}{}:
		return func() { <-c }, true
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, false
}

// Jobs is the job queue (internal/jobs) as hook deliveries use it.
type Jobs interface {
	Register(add func(*river.Workers) error, periodic ...*river.PeriodicJob) error
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) error
}

// HookQueue is the job queue the administrator's hook deliveries run in:
// a queue of their own, so that a slow receiver never holds up ingestion
// or media.
const HookQueue = "hooks"

// WorkspaceHookQueue is the queue of workspaces' hook deliveries: apart
// from the administrator's, so that a user's receiver that never answers
// (each delivery holding a worker up to its 60 s timeout) cannot hold up
// the administrator's audit.
const WorkspaceHookQueue = "hooks_workspace"

// enqueue puts deliveries in the outbox, each with its job (after delay).
func (h *hooks) enqueue(ctx context.Context, ds []db.HookDelivery, delay time.Duration) error {
	if len(ds) == 0 || h.jobs == nil {
		return nil
	}
	return h.store.AddHookDeliveries(ctx, ds, h.insertJob(ctx, delay))
}

// insertJob inserts a delivery's job in the outbox's transaction.
func (h *hooks) insertJob(ctx context.Context, delay time.Duration) func(tx pgx.Tx, d db.HookDelivery) error {
	return func(tx pgx.Tx, d db.HookDelivery) error {
		// An attempt already made (the waited-for tool_execution_start)
		// counts towards the delivery's attempts.
		opts := &river.InsertOpts{Queue: HookQueue, MaxAttempts: max(1, h.cfg.Attempts-d.Attempts)}
		if d.WorkspaceHookID != nil {
			opts.Queue = WorkspaceHookQueue
		}
		if delay > 0 {
			opts.ScheduledAt = time.Now().Add(delay)
		}
		return h.jobs.InsertTx(ctx, tx, HookDeliveryArgs{Delivery: d.ID}, opts)
	}
}

// failureData is the trace step of a delivery that failed.
func failureData(d db.HookDelivery, label string) db.StepData {
	var p HookPayload
	_ = json.Unmarshal([]byte(d.Body), &p)
	return db.StepData{Content: d.Event, Output: label, Tool: p.Tool,
		Error: fmt.Sprintf("Delivery failed (attempt %d): %s. It is retried.", d.Attempts, d.LastError)}
}

func (h *hooks) adminByKey(key string) (target, bool) {
	for _, t := range h.admin {
		if t.key == key {
			return t, true
		}
	}
	return target{}, false
}
