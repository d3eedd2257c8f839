package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/ollama/ollama/api"

	"weft/db"
)

// runCall executes the first pending call: availability, approval, the
// tool, and its result for the model.
func (x *run) runCall(ctx context.Context) error {
	p := &x.cp.Pending[0]
	data := db.StepData{Tool: p.Name, CallID: p.ID, Args: p.Args}
	var s db.Step
	var err error
	if p.Step == 0 {
		if s, err = x.addStepAs(ctx, db.StepToolCall, db.StepRunning, data, func(id int64) { p.Step = id }); err != nil {
			return fmt.Errorf("record tool call: %w", err)
		}
	} else if s, err = x.a.store.StepByID(ctx, x.r.ID, p.Step); err != nil {
		return fmt.Errorf("load tool call: %w", err)
	}
	tool, known := x.a.tool(p.Name)
	if !known {
		return x.finishCall(ctx, s, db.StepRefused, Result{}, "", fmt.Sprintf("There is no tool named %q.", p.Name))
	}
	var args Args
	if err := json.Unmarshal(p.Args, &args); err != nil || args == nil {
		if len(p.Args) > 0 && string(p.Args) != "null" && string(p.Args) != "{}" {
			return x.finishCall(ctx, s, db.StepError, Result{}, "the arguments are not a JSON object", "")
		}
		args = Args{}
	}
	if x.cp.Seen[p.Name+" "+string(p.Args)] > 1 {
		return x.finishCall(ctx, s, db.StepRefused, Result{}, "",
			"Repeated call: this exact call was already made in this run, and its result is above. Do something else, or answer.")
	}
	avail, err := x.availability(ctx)
	if err != nil {
		return err
	}
	var av Availability
	for _, a := range avail {
		if a.Tool.Name == p.Name {
			av = a
		}
	}
	if !av.Available {
		return x.finishCall(ctx, s, db.StepRefused, Result{}, "", av.Reason)
	}
	if av.Asks {
		if p.Approval == 0 {
			if _, err := x.addStepAs(ctx, db.StepApproval, db.StepPending, db.StepData{Tool: p.Name, Args: p.Args, CallStep: s.ID},
				func(id int64) { p.Approval = id }); err != nil {
				return fmt.Errorf("record approval: %w", err)
			}
		}
		dec, err := x.waitFor(ctx, p.Approval, nil)
		if err != nil {
			return err
		}
		if dec.Status == db.DecideDeny {
			return x.finishCall(ctx, s, db.StepRefused, Result{}, "", "The user denied this call.")
		}
		if dec.Status == db.StepCancelled {
			return context.Canceled
		}
		// The approval may have waited while the tool's provider changed
		// (its MCP server reloaded, the tool removed, the server down):
		// the call goes to the tool as it is now, or is refused.
		if tool, known = x.a.tool(p.Name); !known {
			return x.finishCall(ctx, s, db.StepRefused, Result{}, "", fmt.Sprintf("There is no tool named %q.", p.Name))
		}
		if tool.Unavailable != "" {
			return x.finishCall(ctx, s, db.StepRefused, Result{}, "", tool.Unavailable)
		}
	}
	if !p.Started {
		// A policy hook may deny the call; a call started in an earlier
		// life of the run had its tool_execution_start then.
		if denied, reason := x.toolStart(ctx, s); denied {
			return x.finishCall(ctx, s, db.StepRefused, Result{}, "", reason)
		}
		if err := ctx.Err(); err != nil {
			return err // stopped while its hooks were asked
		}
	}
	if p.Name == ToolAskUser {
		return x.ask(ctx, s, args)
	}
	x.running(ctx)
	if tool.Class.Effects() {
		if p.Started {
			// The server stopped while this call ran: it may have taken
			// effect, so it is not made again.
			return x.finishCall(ctx, s, db.StepError, Result{}, "the server stopped while this call was running, so it is not known "+
				"whether it took effect; check the workspace before making it again", "")
		}
		p.Started = true
		if _, err := x.updateStep(ctx, s, db.StepRunning, s.Data); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	if tool.Class.Effects() {
		x.effected = true
	}
	if !slices.Contains(x.called, p.Name) {
		x.called = append(x.called, p.Name)
	}
	tctx, cancel := context.WithTimeout(ctx, x.a.cfg.ToolTimeout)
	if tool.Class == ClassDelegate {
		// Its children have budgets of their own, and may wait for
		// the user's approvals.
		cancel()
		tctx, cancel = context.WithCancel(ctx)
	}
	x.toolRunning(p)
	res, err := tool.Run(tctx, x.env, args)
	x.toolRunning(nil)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			if len(res.Changes) > 0 {
				// A stopped call that changed files anyway (a command
				// killed halfway): the ledger stays true.
				x.cp.Changes = mergeChanges(x.cp.Changes, res.Changes)
				s.Data.Changes = res.Changes
				if err := x.saveCheckpoint(ctx, s); err != nil {
					slog.Warn("checkpoint", "run", x.r.ID, "err", err)
				}
			}
			if p.Started && errors.Is(err, context.Canceled) {
				// The built-in tools stop before changing anything when
				// their context ends: a resumed run may make the call.
				p.Started = false
				if err := x.saveCheckpoint(ctx, s); err != nil {
					slog.Warn("checkpoint", "run", x.r.ID, "err", err)
				}
			}
			return ctx.Err()
		}
		var te *ToolError
		switch {
		case errors.As(err, &te):
			return x.finishCall(ctx, s, db.StepError, Result{}, te.Msg, "")
		case errors.Is(err, context.DeadlineExceeded):
			return x.finishCall(ctx, s, db.StepError, Result{}, fmt.Sprintf("the tool took longer than %s and was stopped", x.a.cfg.ToolTimeout), "")
		default:
			slog.Warn("tool failed", "run", x.r.ID, "tool", p.Name, "err", err)
			return x.finishCall(ctx, s, db.StepError, Result{}, "the tool failed on the server", "")
		}
	}
	return x.finishCall(ctx, s, db.StepOK, res, "", "")
}

// finishCall records a call's outcome, gives the model its result and moves
// to the next pending call, in one checkpoint.
func (x *run) finishCall(ctx context.Context, s db.Step, status string, res Result, errText, reason string) error {
	p := x.cp.Pending[0]
	content := res.Output
	switch status {
	case db.StepError:
		content = "Error: " + errText
	case db.StepRefused:
		content = "Refused: " + reason
	default:
		x.cp.Changes = mergeChanges(x.cp.Changes, res.Changes)
		x.cp.Sources = mergeSources(x.cp.Sources, res.Sources)
	}
	x.cp.Messages = append(x.cp.Messages, api.Message{Role: "tool", Content: content, ToolName: p.Name, ToolCallID: p.ID})
	x.cp.Pending = x.cp.Pending[1:]
	data := s.Data
	data.Output, data.Error, data.Reason = res.Output, errText, reason
	if status == db.StepOK {
		data.Changes, data.Sources = res.Changes, res.Sources
	}
	// tool_execution_end is put in the outbox with the result, in one
	// transaction: a crash in between cannot lose it.
	if _, err := x.updateStepWith(ctx, s, status, data, x.toolEnd(s, p, status, res, errText, reason)); err != nil {
		return fmt.Errorf("record tool result: %w", err)
	}
	return nil
}

// mergeChanges adds changes, one entry per path: created then modified
// stays created; created then deleted disappears.
func mergeChanges(have, add []db.FileChange) []db.FileChange {
	for _, c := range add {
		i := -1
		for j, h := range have {
			if h.Path == c.Path {
				i = j
			}
		}
		switch {
		case i < 0:
			have = append(have, c)
		case have[i].Op == OpCreated && c.Op == OpModified:
		case have[i].Op == OpCreated && c.Op == OpDeleted:
			have = append(have[:i], have[i+1:]...)
		case have[i].Op == OpDeleted && c.Op == OpCreated:
			have[i].Op = OpModified
		default:
			have[i].Op = c.Op
		}
	}
	return have
}

func mergeSources(have, add []db.StepSource) []db.StepSource {
outer:
	for _, s := range add {
		for _, h := range have {
			if h == s {
				continue outer
			}
		}
		have = append(have, s)
	}
	return have
}
