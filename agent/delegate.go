package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"weft/chat"
	"weft/db"
	"weft/internal/usererr"
)

// Sub-agents: delegate_task and delegate_parallel hand tasks to children.
// A child is a run of its own (runs.parent_run_id, its own steps, usage
// and checkpoint) executing the same loop as its parent, with:
//
//   - a fresh context: the system prompt and role like every request, the
//     execution context, and its task as the one user message (none of
//     the thread's turns);
//   - tools that only narrow its parent's: the workspace's rules and the
//     thread's approvals apply as they are, a tools list keeps a subset,
//     and delegation itself is never offered (one level deep); approvals
//     still go to the user, on the child's card, which names it;
//   - a budget of model rounds and time;
//   - its parent's context: Stop (or shutdown) of the parent stops it.
//
// Its answer, files changed, sources and a short evidence summary come
// back to the parent as the tool result. The child's steps and result are
// stored under the parent's tool call, which is the one projection the
// trace renders (live, after a reload, in a second tab); they are never
// messages of the thread, so later prompts do not see them.

// Tool names (the same as db's, for the model).
const (
	ToolDelegateTask     = db.ToolDelegateTask
	ToolDelegateParallel = db.ToolDelegateParallel
)

// ClassDelegate is the class of the delegation tools: on and automatic by
// default (each call a child makes is governed on its own), and, as its
// children may have changed things, never made again by a resumed run
// that finds it started.
const ClassDelegate Class = "delegate"

// Sub-agent limits.
const (
	maxSubTasks      = 6    // tasks in one delegate_parallel call
	maxSubPerRun     = 24   // tasks delegated by one run in all
	maxTaskRunes     = 8000 // one task's text
	maxSubAnswer     = 8000 // bytes of a child's answer in the parent's tool result
	subLiveEvery     = time.Second
	subContextPrefix = "You are a sub-agent: the main agent delegated one task to you. Work on that task only, with the tools you are given. " +
		"Your final answer goes back to the main agent, not to the user: make it a complete, self-contained report of what you found or did " +
		"(say which files you changed)."
)

func delegateTools() []Tool {
	toolsParam := Param{Name: "tools", Type: "array", Items: map[string]any{"type": "string"},
		Description: "Optional: the names of the tools the sub-agent may use (a subset of yours); default: all of yours except delegation"}
	return []Tool{
		{
			Name: ToolDelegateTask,
			Description: "Delegate one self-contained task to a sub-agent with a fresh context and a step budget. " +
				"It works on its own and returns its answer, the files it changed and its sources.",
			Class: ClassDelegate,
			Params: []Param{
				{Name: "task", Type: "string", Description: "The task, with everything the sub-agent needs to know", Required: true},
				toolsParam,
			},
			Run: func(ctx context.Context, env *Env, args Args) (Result, error) {
				t, err := parseSubTask(args)
				if err != nil {
					return Result{}, err
				}
				return delegate(ctx, env, []subTask{t})
			},
		},
		{
			Name: ToolDelegateParallel,
			Description: fmt.Sprintf("Delegate several independent tasks (at most %d) to sub-agents that work at the same time, "+
				"each with a fresh context and a step budget. Returns each one's answer, files changed and sources.", maxSubTasks),
			Class: ClassDelegate,
			Params: []Param{
				{Name: "tasks", Type: "array", Required: true, Description: "The tasks: objects with a task and optional tools",
					Items: map[string]any{"type": "object", "properties": map[string]any{
						"task":  map[string]any{"type": "string"},
						"tools": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
					}, "required": []string{"task"}}},
			},
			Run: func(ctx context.Context, env *Env, args Args) (Result, error) {
				raw, ok := args["tasks"].([]any)
				if !ok || len(raw) == 0 {
					return Result{}, Errorf("tasks must be a non-empty list of objects like {\"task\": \"…\"}")
				}
				if len(raw) > maxSubTasks {
					return Result{}, Errorf("at most %d tasks can be delegated at once (got %d)", maxSubTasks, len(raw))
				}
				var ts []subTask
				for i, r := range raw {
					var a Args
					switch v := r.(type) {
					case map[string]any:
						a = v
					case string:
						a = Args{"task": v}
					default:
						return Result{}, Errorf("task %d must be an object like {\"task\": \"…\"}", i+1)
					}
					t, err := parseSubTask(a)
					if err != nil {
						return Result{}, Errorf("task %d: %s", i+1, err.Error())
					}
					ts = append(ts, t)
				}
				return delegate(ctx, env, ts)
			},
		},
	}
}

// subTask is one task to delegate.
type subTask struct {
	Task  string
	Tools []string
}

func parseSubTask(args Args) (subTask, error) {
	task, err := args.String("task", true)
	if err != nil {
		return subTask{}, err
	}
	task = strings.TrimSpace(task)
	if task == "" {
		return subTask{}, Errorf("the task is empty")
	}
	if n := utf8.RuneCountInString(task); n > maxTaskRunes {
		return subTask{}, Errorf("the task is %d characters long; at most %d", n, maxTaskRunes)
	}
	t := subTask{Task: task}
	switch v := args["tools"].(type) {
	case nil:
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return subTask{}, Errorf("tools must be a list of tool names")
			}
			if s = strings.TrimSpace(s); s != "" && !slices.Contains(t.Tools, s) {
				t.Tools = append(t.Tools, s)
			}
		}
	default:
		return subTask{}, Errorf("tools must be a list of tool names")
	}
	if args["tools"] != nil && len(t.Tools) == 0 {
		return subTask{}, Errorf("tools is empty: name the tools the sub-agent may use, or leave tools out to give it all of yours")
	}
	return t, nil
}

// subStore is what sub-agents need of the store (db.DB has it; without it
// delegation is unavailable).
type subStore interface {
	AddSubRun(ctx context.Context, parent, step int64, sub db.Subagent) (db.Run, error)
	StartSubRun(ctx context.Context, run int64) error
	SetSubLive(ctx context.Context, run int64, live string) error
	FinishSubRun(ctx context.Context, run int64, status, errText string, usage db.Usage, sub db.Subagent) error
	EndSubRuns(ctx context.Context, parent int64, status string) error
	Notify(ctx context.Context, kind byte, id int64) error
}

// subOutcome is how one child ended.
type subOutcome struct {
	sub      db.Subagent
	status   string
	err      string
	effected bool // it started a call that may have changed something
	usage    db.Usage
}

// delegate runs the tasks as children of env's run, at most
// cfg.SubagentConcurrency at once, and returns their results as one tool
// result.
func delegate(ctx context.Context, env *Env, tasks []subTask) (Result, error) {
	x := env.run
	if x == nil || x.sub != nil {
		return Result{}, Errorf("a sub-agent cannot delegate further: sub-agents are one level deep")
	}
	st, ok := x.a.store.(subStore)
	if !ok {
		return Result{}, Errorf("sub-agents are not available on this server")
	}
	if x.cp.Delegated+len(tasks) > maxSubPerRun {
		return Result{}, Errorf("this run already delegated %d tasks; at most %d can be delegated in one run: do the rest yourself",
			x.cp.Delegated, maxSubPerRun)
	}
	call := x.currentCallStep()
	if call == 0 {
		return Result{}, errors.New("delegate: no tool-call step")
	}
	// Every tool name asked for must be one the parent may use now:
	// a child's tools only narrow its parent's.
	avail, err := x.availability(ctx)
	if err != nil {
		return Result{}, err
	}
	usable := map[string]bool{}
	for _, av := range avail {
		if av.Available && !db.IsDelegation(av.Tool.Name) {
			usable[av.Tool.Name] = true
		}
	}
	for i, t := range tasks {
		for _, name := range t.Tools {
			if !usable[x.a.canonical(name)] {
				return Result{}, Errorf("task %d asks for the tool %q, which you cannot use here; choose among your own tools", i+1, name)
			}
		}
	}
	bg := context.WithoutCancel(ctx)
	rounds := x.a.cfg.SubagentRounds
	if x.max > 0 {
		rounds = min(rounds, x.max)
	}
	// Children are recorded before any starts, so that the card shows the
	// whole batch at once, in order.
	kids := make([]*run, len(tasks))
	for i, t := range tasks {
		names := make([]string, len(t.Tools))
		for j, n := range t.Tools {
			names[j] = x.a.canonical(n)
		}
		sub := db.Subagent{Task: t.Task, Tools: names, Index: i, MaxRounds: rounds, MaxSeconds: int(x.a.cfg.SubagentTime / time.Second)}
		r, err := st.AddSubRun(bg, x.r.ID, call, sub)
		if err != nil {
			// Those already recorded never ran: they end as failed.
			for _, k := range kids[:i] {
				_ = st.FinishSubRun(bg, k.r.ID, db.RunFailed, "The delegation could not be recorded.", db.Usage{}, *k.sub)
			}
			return Result{}, fmt.Errorf("record sub-agent: %w", err)
		}
		kids[i] = &run{a: x.a, h: x.h.Child(r), r: r, sub: &sub}
	}
	x.cp.Delegated += len(kids) // saved with the call's result
	x.h.Stepped()
	outs := make([]subOutcome, len(kids))
	sem := make(chan struct{}, max(x.a.cfg.SubagentConcurrency, 1))
	var wg sync.WaitGroup
	for i, k := range kids {
		// Slots are taken here, in task order: the first tasks start
		// first. Stopped meanwhile, the rest end as not started.
		held := false
		select {
		case sem <- struct{}{}:
			held = true
		case <-ctx.Done():
		}
		wg.Go(func() {
			if held {
				defer func() { <-sem }()
			}
			outs[i] = k.runSub(ctx, st)
		})
	}
	wg.Wait()
	x.h.Stepped()

	var res Result
	var b strings.Builder
	effected := false
	for i, o := range outs {
		res.Changes = mergeChanges(res.Changes, o.sub.Changes)
		res.Sources = mergeSources(res.Sources, o.sub.Sources)
		effected = effected || o.effected
		if len(outs) > 1 {
			fmt.Fprintf(&b, "## Sub-agent %d of %d\n", i+1, len(outs))
		}
		// The task is not repeated: the model wrote it.
		fmt.Fprintf(&b, "Status: %s (%s)\n", subStatusWord(o.status), o.sub.Summary)
		if o.err != "" {
			fmt.Fprintf(&b, "Error: %s\n", o.err)
		}
		if o.sub.Answer != "" {
			fmt.Fprintf(&b, "Answer:\n%s\n", capText(o.sub.Answer, maxSubAnswer))
		}
		if len(o.sub.Changes) > 0 {
			b.WriteString("Files changed: " + changesLine(o.sub.Changes) + "\n")
		}
		if len(o.sub.Sources) > 0 {
			var ls []string
			for _, s := range o.sub.Sources {
				ls = append(ls, s.Kind+" "+s.Label)
			}
			b.WriteString("Sources: " + strings.Join(ls, "; ") + "\n")
		}
		b.WriteString("\n")
	}
	res.Output = strings.TrimSpace(b.String())
	if ctx.Err() != nil {
		// Never context.Canceled once children were recorded: a resumed
		// parent must not delegate again under the same call (its
		// children may have changed files, and its card would hold two
		// batches); it reports the delegation's outcome as unknown.
		return res, errDelegationStopped
	}
	return res, nil
}

var errDelegationStopped = errors.New("the delegation was stopped")

var errOutOfTime = errors.New("the sub-agent ran out of its time budget")

// budget is a sub-agent's time budget: it calls out when the time spent
// working (not waiting for the user) reaches its limit.
type budget struct {
	mu      sync.Mutex
	left    time.Duration
	since   time.Time
	timer   *time.Timer
	out     func()
	stopped bool
}

func newBudget(d time.Duration, out func()) *budget {
	b := &budget{left: d, out: out}
	b.resume()
	return b
}

// pause stops the clock (the sub-agent waits for its user).
func (b *budget) pause() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.timer == nil || b.stopped {
		return
	}
	if b.timer.Stop() {
		b.left -= time.Since(b.since)
	}
	b.timer = nil
}

// resume starts the clock again.
func (b *budget) resume() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.timer != nil || b.stopped {
		return
	}
	b.since = time.Now()
	b.timer = time.AfterFunc(max(b.left, 0), b.out)
}

func (b *budget) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	if b.timer != nil {
		b.timer.Stop()
	}
}

func subStatusWord(s string) string {
	switch s {
	case db.RunCompleted:
		return "completed"
	case db.RunCancelled:
		return "stopped"
	case db.RunInterrupted:
		return "interrupted"
	}
	return "failed"
}

func changesLine(cs []db.FileChange) string {
	var ls []string
	for _, c := range cs {
		ls = append(ls, c.Op+" "+c.Path)
	}
	return strings.Join(ls, ", ")
}

// currentCallStep is the tool-call step of the call being made.
func (x *run) currentCallStep() int64 {
	if len(x.cp.Pending) == 0 {
		return 0
	}
	return x.cp.Pending[0].Step
}

// runSub executes a child to its end and records its result.
func (x *run) runSub(ctx context.Context, st subStore) subOutcome {
	bg := context.WithoutCancel(ctx)
	sub := *x.sub
	if ctx.Err() != nil {
		// Stopped before its turn came.
		o := subOutcome{sub: sub, status: db.RunCancelled, err: "Stopped before it started."}
		o.sub.Summary = "did not start"
		x.finishSub(bg, st, o)
		return o
	}
	if err := st.StartSubRun(bg, x.r.ID); err != nil {
		slog.Warn("record sub-agent start", "run", x.r.ID, "err", err)
	}
	x.h.Stepped()
	// The time budget runs while it works, not while it waits for its
	// user's decision (waitFor pauses it).
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	x.budget = newBudget(x.a.cfg.SubagentTime, func() { cancel(errOutOfTime) })
	defer x.budget.stop()
	stopLive := x.liveText(cctx, st)
	res := x.loop(cctx)
	stopLive()
	if x.waiting {
		// It stopped while waiting for its user (its time budget, Stop):
		// its parent no longer shows waiting for it.
		x.waiting = false
		x.h.SetStatus(db.RunRunning)
	}
	// A call that did not finish, an approval or question still pending:
	// settled as cancelled, as a run of its own is.
	sctx, scancel := context.WithTimeout(bg, 5*time.Second)
	if err := x.a.store.SettlePending(sctx, x.r.ID, db.StepCancelled); err != nil {
		slog.Warn("settle sub-agent steps", "run", x.r.ID, "err", err)
	}
	scancel()
	o := subOutcome{sub: sub, usage: res.Usage, effected: x.effected}
	switch {
	case res.Done:
		o.status = db.RunCompleted
		if x.cp.Final != nil {
			o.sub.Answer = x.cp.Final.Content
		}
	case ctx.Err() != nil && x.h.StopReason() == chat.StopShutdown:
		o.status, o.err = db.RunInterrupted, "The server stopped while this sub-agent was working."
	case ctx.Err() != nil:
		o.status, o.err = db.RunCancelled, "Stopped."
	case errors.Is(context.Cause(cctx), errOutOfTime):
		o.status, o.err = db.RunFailed, fmt.Sprintf("It ran out of its time budget (%s).", x.a.cfg.SubagentTime)
	default:
		o.status = db.RunFailed
		if msg, ok := usererr.Message(x.shown(res.Err)); ok {
			o.err = msg
		} else {
			o.err = "It stopped because of an error."
		}
	}
	o.sub.Changes, o.sub.Sources, o.sub.Rounds = x.cp.Changes, x.cp.Sources, x.cp.Round
	o.sub.Summary = x.evidenceSummary()
	x.agentEnd(bg, o.status, chatResult{err: res.Err, usage: res.Usage})
	x.finishSub(bg, st, o)
	return o
}

func (x *run) finishSub(ctx context.Context, st subStore, o subOutcome) {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := st.FinishSubRun(wctx, x.r.ID, o.status, o.err, o.usage, o.sub); err != nil {
		slog.Error("record sub-agent result", "run", x.r.ID, "err", err)
	}
	x.h.Stepped()
	x.notifyParent(wctx, st)
}

// evidenceSummary is the short evidence summary of a child: rounds, the
// tools it called and what it changed.
func (x *run) evidenceSummary() string {
	parts := []string{fmt.Sprintf("%d %s", x.cp.Round, plural(x.cp.Round, "round", "rounds"))}
	if len(x.called) > 0 {
		parts = append(parts, "used "+strings.Join(x.called, ", "))
	}
	if n := len(x.cp.Changes); n > 0 {
		parts = append(parts, fmt.Sprintf("%d %s changed", n, plural(n, "file", "files")))
	}
	if n := len(x.cp.Sources); n > 0 {
		parts = append(parts, fmt.Sprintf("%d %s", n, plural(n, "source", "sources")))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// liveText saves the child's current text about once a second while it
// works, so that its card shows it live on every instance and after a
// reload. The returned func stops it.
func (x *run) liveText(ctx context.Context, st subStore) func() {
	done := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(subLiveEvery)
		defer t.Stop()
		last := ""
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			text, _ := x.h.Text()
			if text == last {
				continue
			}
			last = text
			if err := st.SetSubLive(ctx, x.r.ID, tailText(text, 16<<10)); err != nil {
				continue
			}
			x.h.Stepped()
			x.notifyParent(ctx, st)
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}

// tailText keeps the last n bytes of s (whole characters), marked as cut:
// a working sub-agent's newest text.
func tailText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := len(s) - n
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return "…" + s[cut:]
}

// notifyParent tells the parent's followers on other instances that its
// trace changed.
func (x *run) notifyParent(ctx context.Context, st subStore) {
	if x.r.ParentRunID == nil {
		return
	}
	if err := st.Notify(ctx, db.NoteProgress, *x.r.ParentRunID); err != nil {
		slog.Debug("notify parent run", "run", x.r.ID, "err", err)
	}
}

// narrow applies a child's limits to the availability of its tools: no
// delegation, and only the tools it was given.
func (x *run) narrow(avail []Availability) {
	if x.sub == nil {
		return
	}
	for i := range avail {
		av := &avail[i]
		if !av.Available {
			continue
		}
		switch {
		case db.IsDelegation(av.Tool.Name):
			av.Available, av.Asks, av.Reason = false, false, "A sub-agent cannot delegate further: sub-agents are one level deep."
		case len(x.sub.Tools) > 0 && !slices.Contains(x.sub.Tools, av.Tool.Name):
			av.Available, av.Asks, av.Reason = false, false, "Not among the tools this sub-agent was given."
		}
	}
}
