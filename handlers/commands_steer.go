package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"weft/chat"
	"weft/db"
	"weft/internal/usererr"
)

// steerStore is what /steer and /status need beyond threadStore (db.DB
// has it).
type steerStore interface {
	AddSteer(ctx context.Context, user, run int64, text string) (db.Step, error)
	Steps(ctx context.Context, user, run int64) ([]db.Step, error)
	LateSteers(ctx context.Context, user, thread int64) ([]db.Step, error)
}

// maxSteerRunes bounds a steering message.
const maxSteerRunes = 4000

// current is the thread's run being executed (running or waiting) or,
// when none is, its oldest queued one; queued counts the runs queued
// behind it.
func current(active []db.Run) (cur *db.Run, queued int) {
	for i, r := range active {
		if r.Status == db.RunRunning || r.Status == db.RunWaiting {
			cur = &active[i]
		}
	}
	for i, r := range active {
		if r.Status == db.RunQueued {
			if cur == nil {
				cur = &active[i]
				continue
			}
			queued++
		}
	}
	return cur, queued
}

// cmdSteer gives the thread's running agent run a message, taken at its
// next round boundary (before its next model request) wherever it runs.
func (h *threads) cmdSteer(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, t db.Thread, text string) {
	st, ok := h.store.(steerStore)
	if !ok {
		serverError(w, r, errors.New("the store cannot take steering messages"))
		return
	}
	if text == "" || utf8.RuneCountInString(text) > maxSteerRunes {
		h.refuse(w, r, in, "Write what the agent should know after the command, for example: /steer use tabs, not spaces (at most 4,000 characters).")
		return
	}
	active, err := h.store.ActiveRuns(r.Context(), u.ID, t.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	cur, _ := current(active)
	if cur == nil || cur.Kind != db.RouteAgent {
		h.refuse(w, r, in, "No agent run is running in this thread, so there is nothing to steer. Send it as a message instead (/queue TEXT sends it after the current answer).")
		return
	}
	_, err = st.AddSteer(r.Context(), u.ID, cur.ID, text)
	if errors.Is(err, db.ErrRunNotActive) {
		h.refuse(w, r, in, "The agent run ended just now, so the steering was not taken. Send it as a message instead.")
		return
	}
	if err != nil {
		storeError(w, r, err)
		return
	}
	h.notice(w, r, in, "Steering sent: the agent takes it before its next model request, and its trace shows where.")
}

// cmdQueue sends a message explicitly queued: answered after the thread's
// current run (every message sent while a run is active is queued so; this
// says it).
func (h *threads) cmdQueue(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, t db.Thread, text string) {
	if text == "" {
		h.refuse(w, r, in, "Write the message after the command, for example: /queue then write the tests.")
		return
	}
	active, err := h.store.ActiveRuns(r.Context(), u.ID, t.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	in.Content = unescapeSlash(text)
	if !h.readInput(w, r, &in) {
		return
	}
	sent, err := h.rt.Send(r.Context(), u.ID, in)
	switch {
	case errors.Is(err, chat.ErrEmpty), errors.Is(err, chat.ErrTooLong):
		h.refuse(w, r, in, "Message not queued: "+usererr.Or(err, "it could not be read")+".")
		return
	case errors.Is(err, chat.ErrRefused):
		h.refuse(w, r, in, usererr.Or(err, "Message not queued."))
		return
	case err != nil:
		storeError(w, r, err)
		return
	}
	msg := "Sent: nothing else was running, so it is answered now."
	if len(active) > 0 {
		msg = fmt.Sprintf("Queued: answered after the current answer (%d ahead of it).", len(active))
	}
	noteReply(r, msg, false)
	h.shell.sessions.Put(r.Context(), sessionFlash, msg)
	redirect(w, r, fmt.Sprintf("/t/%d#m%d", t.ID, sent.Assistant.ID))
}

// cmdStatus says what the thread is doing: its run, queue, model, context
// fill, tools and any pending approval or question.
func (h *threads) cmdStatus(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, t db.Thread) {
	ctx := r.Context()
	st, ok := h.store.(steerStore)
	if !ok {
		serverError(w, r, errors.New("the store cannot list steps"))
		return
	}
	active, err := h.store.ActiveRuns(ctx, u.ID, t.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	var parts []string
	cur, queued := current(active)
	var steps []db.Step
	switch {
	case cur == nil:
		parts = append(parts, "Nothing is running.")
	default:
		what := "An answer"
		if cur.Kind == db.RouteAgent {
			what = "An agent run"
			if steps, err = st.Steps(ctx, u.ID, cur.ID); err != nil {
				serverError(w, r, err)
				return
			}
		}
		rounds := 0
		for _, s := range steps {
			if s.Kind == db.StepModelTurn {
				rounds++
			}
		}
		state := map[string]string{db.RunQueued: "is queued", db.RunRunning: "is running", db.RunWaiting: "is waiting for you"}[cur.Status]
		if cur.Kind == db.RouteAgent {
			state += fmt.Sprintf(" (%d %s done)", rounds, plural(rounds, "round", "rounds"))
		}
		parts = append(parts, fmt.Sprintf("%s %s with %s.", what, state, orNone(cur.Model)))
	}
	parts = append(parts, fmt.Sprintf("Queue: %d %s.", queued, plural(queued, "message", "messages")))
	for _, s := range steps {
		// A sub-agent's approval or question is the user's to settle too.
		for _, c := range s.Subagents {
			for _, cs := range c.Steps {
				if cs.Status == db.StepPending && cs.Kind == db.StepApproval {
					parts = append(parts, fmt.Sprintf("Sub-agent %d of %d waits for your approval: %s %s.", c.Sub.Index+1, len(s.Subagents), cs.Data.Tool, compactArgs(cs.Data.Args)))
				}
				if cs.Status == db.StepPending && cs.Kind == db.StepQuestion {
					parts = append(parts, fmt.Sprintf("Sub-agent %d of %d waits for your answer to a question.", c.Sub.Index+1, len(s.Subagents)))
				}
			}
		}
		if s.Status != db.StepPending {
			continue
		}
		switch s.Kind {
		case db.StepApproval:
			parts = append(parts, fmt.Sprintf("Waiting for your approval: %s %s.", s.Data.Tool, compactArgs(s.Data.Args)))
		case db.StepQuestion:
			parts = append(parts, "Waiting for your answer to a question.")
		case db.StepSteer:
			parts = append(parts, "Steering not yet taken: “"+s.Data.Content+"”.")
		}
	}
	if cur == nil {
		// Sent while the model wrote its final answer: the run ended
		// without taking it.
		late, err := st.LateSteers(ctx, u.ID, t.ID)
		if err != nil {
			serverError(w, r, err)
			return
		}
		for _, s := range late {
			parts = append(parts, "Steering not taken: “"+s.Data.Content+"” arrived after the agent's last round; send it as a message.")
		}
	}
	parts = append(parts, "Model: "+orNone(t.Model)+".")
	g, err := h.rt.ContextGauge(ctx, u.ID, t.ID)
	if err != nil {
		storeError(w, r, err)
		return
	}
	parts = append(parts, fmt.Sprintf("Context: about %d of %d tokens (%d%%).", g.Estimate, g.NumCtx, percentOf(g.Estimate, g.NumCtx)))
	if !t.AgentEnabled {
		parts = append(parts, "Agent: off.")
	} else {
		ws, err := h.store.Workspace(ctx, u.ID, t.WorkspaceID)
		if err != nil {
			storeError(w, r, err)
			return
		}
		tools, err := h.shell.agent.toolStates(ctx, u.ID, ws, t.ID, t.Model)
		if err != nil {
			serverError(w, r, err)
			return
		}
		var avail, asks []string
		for _, ts := range tools {
			if ts.Available {
				avail = append(avail, ts.Name)
				if ts.Asks {
					asks = append(asks, ts.Name)
				}
			}
		}
		parts = append(parts, fmt.Sprintf("Tools: %s; asking first: %s.", orNone(strings.Join(avail, ", ")), orNone(strings.Join(asks, ", "))))
	}
	h.notice(w, r, in, strings.Join(parts, " "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func compactArgs(raw []byte) string {
	s := strings.Join(strings.Fields(string(raw)), " ")
	if utf8.RuneCountInString(s) > 200 {
		s = string([]rune(s)[:200]) + "…"
	}
	return s
}
