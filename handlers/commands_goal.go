package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"weft/chat"
	"weft/db"
	"weft/views"
)

// goalStore is what goal mode's commands and panel need (db.DB has it).
type goalStore interface {
	Goal(ctx context.Context, user, thread int64) (db.Goal, error)
	SetGoal(ctx context.Context, user, thread int64, text string) (db.Goal, error)
	SetGoalBudget(ctx context.Context, user, thread int64, b db.GoalBudget) (db.Goal, error)
	PauseGoal(ctx context.Context, user, thread int64, note string) (db.Goal, error)
	ClearGoal(ctx context.Context, user, thread int64) error
}

// goalRuntime resumes goals (chat.Runtime): a resumed goal of an idle
// thread continues at once.
type goalRuntime interface {
	ResumeGoal(ctx context.Context, user, thread int64) (db.Goal, *db.Sent, error)
}

// goalDid is what a goal action did: the goal after it (nil: cleared), the
// reply, or a refusal; sent is a continuation it started.
type goalDid struct {
	goal    *db.Goal
	reply   string
	refusal string
	sent    *db.Sent
}

// goalAction runs one of the goal actions on one of the user's threads:
// show, set (text), budget, pause, resume, clear.
func goalAction(ctx context.Context, gs goalStore, rt goalRuntime, user int64, t db.Thread, action, text string, b db.GoalBudget) (goalDid, error) {
	var g db.Goal
	var err error
	switch action {
	case "set":
		if g, err = gs.SetGoal(ctx, user, t.ID, text); err != nil {
			return goalDid{}, err
		}
		msg := fmt.Sprintf("Goal set: %s. After each agent run of this thread the model checks whether it is met and, if not, continues on its own, within %s (/goal budget changes it). Send a message to start.",
			g.Text, budgetWords(g))
		if !t.AgentEnabled {
			msg += " The agent is off in this thread: only agent runs are checked, so turn it on."
		}
		return goalDid{goal: &g, reply: msg}, nil
	case "clear":
		if err := gs.ClearGoal(ctx, user, t.ID); err != nil {
			return goalDid{}, err
		}
		return goalDid{reply: "Goal cleared: nothing continues on its own any more."}, nil
	}
	if g, err = gs.Goal(ctx, user, t.ID); err != nil {
		return goalDid{}, err
	}
	switch action {
	case "budget":
		if b == (db.GoalBudget{}) {
			return goalDid{goal: &g, reply: "Budget: " + budgetWords(g) + ". " + usedWords(g)}, nil
		}
		if g, err = gs.SetGoalBudget(ctx, user, t.ID, b); err != nil {
			return goalDid{}, err
		}
		return goalDid{goal: &g, reply: "Budget set: " + budgetWords(g) + ". " + usedWords(g)}, nil
	case "pause":
		g, err = gs.PauseGoal(ctx, user, t.ID, "Paused by you.")
		if errors.Is(err, db.ErrGoalNotActive) {
			return goalDid{goal: &g, refusal: "The goal is not active (" + g.Status + "), so there is nothing to pause."}, nil
		}
		if err != nil {
			return goalDid{}, err
		}
		return goalDid{goal: &g, reply: "Goal paused: no check and no continuation until /goal resume."}, nil
	case "resume":
		ng, sent, err := rt.ResumeGoal(ctx, user, t.ID)
		switch {
		case errors.Is(err, db.ErrGoalMet):
			return goalDid{goal: &g, refusal: "The goal is met. Set a new one with /goal TEXT."}, nil
		case errors.Is(err, db.ErrGoalBudgetUsed):
			return goalDid{goal: &g, refusal: "The goal's budget is used up (" + usedWords(g) + "). Raise it first: /goal budget runs=N tokens=N."}, nil
		case err != nil:
			return goalDid{}, err
		}
		msg := "Goal resumed: it is checked after the next agent run of this thread."
		if sent != nil {
			msg = "Goal resumed: continuing toward it now."
		} else if g.Status == db.GoalActive {
			msg = "The goal is already active."
		}
		return goalDid{goal: &ng, reply: msg, sent: sent}, nil
	}
	msg := fmt.Sprintf("Goal (%s): %s. %s Budget: %s.", g.Status, g.Text, usedWords(g), budgetWords(g))
	if g.Note != "" {
		msg += " Last: " + g.Note
	}
	return goalDid{goal: &g, reply: msg}, nil
}

func budgetWords(g db.Goal) string {
	return fmt.Sprintf("%d continuation %s, %d tokens, %d minutes", g.MaxRuns, plural(g.MaxRuns, "run", "runs"), g.MaxTokens, g.MaxSeconds/60)
}

func usedWords(g db.Goal) string {
	minutes := int(g.ElapsedMS / 60000)
	return fmt.Sprintf("Used: %d of %d continuation runs, %d of %d tokens, %d of %d minutes; left: %d %s, %d tokens, %d minutes.",
		g.RunsUsed, g.MaxRuns, g.TokensUsed, g.MaxTokens, minutes, g.MaxSeconds/60,
		max(g.MaxRuns-g.RunsUsed, 0), plural(max(g.MaxRuns-g.RunsUsed, 0), "run", "runs"),
		max(int64(g.MaxTokens)-g.TokensUsed, 0), max(g.MaxSeconds/60-minutes, 0))
}

// goalBudgetUsage is how a budget is written.
const goalBudgetUsage = "Write the budget as /goal budget runs=5 tokens=100000 minutes=20 (any of them): runs 0 to 50, tokens 1,000 to 10,000,000, minutes 1 to 1,440."

// budgetValue reads one part of a budget (ok false: out of bounds).
func budgetValue(s string, lo, hi int) (*int, bool) {
	n, err := strconv.Atoi(strings.ReplaceAll(strings.ReplaceAll(s, "_", ""), ",", ""))
	if err != nil || n < lo || n > hi {
		return nil, false
	}
	return &n, true
}

// parseGoalBudget reads "runs=5 tokens=100000 minutes=20".
func parseGoalBudget(arg string) (db.GoalBudget, bool) {
	var b db.GoalBudget
	for _, f := range strings.Fields(arg) {
		k, v, ok := strings.Cut(strings.ToLower(f), "=")
		if !ok {
			return b, false
		}
		switch k {
		case "runs":
			b.Runs, ok = budgetValue(v, 0, db.MaxGoalRuns)
		case "tokens":
			b.Tokens, ok = budgetValue(v, db.MinGoalTokens, db.MaxGoalTokens)
		case "minutes":
			var m *int
			if m, ok = budgetValue(v, db.MinGoalSeconds/60, db.MaxGoalSeconds/60); ok {
				s := *m * 60
				b.Seconds = &s
			}
		default:
			ok = false
		}
		if !ok {
			return b, false
		}
	}
	return b, true
}

// cmdGoal runs /goal: alone it shows the goal; TEXT sets it; pause,
// resume, clear and budget change it.
func (h *threads) cmdGoal(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, t db.Thread, arg string) {
	gs, ok1 := h.store.(goalStore)
	rt, ok2 := h.rt.(goalRuntime)
	if !ok1 || !ok2 {
		serverError(w, r, errors.New("the store or runtime keeps no goals"))
		return
	}
	action, text := "show", ""
	var b db.GoalBudget
	word, rest, _ := strings.Cut(arg, " ")
	switch lw := strings.ToLower(word); {
	case arg == "":
	case (lw == "pause" || lw == "resume" || lw == "clear") && strings.TrimSpace(rest) == "":
		action = lw
	case lw == "budget":
		action = "budget"
		var ok bool
		if b, ok = parseGoalBudget(rest); !ok {
			h.refuse(w, r, in, goalBudgetUsage)
			return
		}
	default:
		action, text = "set", arg
		if utf8.RuneCountInString(text) > db.MaxGoalRunes {
			h.refuse(w, r, in, fmt.Sprintf("A goal is at most %d characters.", db.MaxGoalRunes))
			return
		}
	}
	did, err := goalAction(r.Context(), gs, rt, u.ID, t, action, text, b)
	switch {
	case errors.Is(err, db.ErrNotFound) && action != "set":
		h.refuse(w, r, in, "This thread has no goal. /goal TEXT gives it one: the agent then keeps working toward it on its own, within a budget.")
		return
	case err != nil:
		storeError(w, r, err)
		return
	case did.refusal != "":
		h.refuse(w, r, in, did.refusal)
		return
	case did.sent != nil:
		// A continuation started: the page shows it.
		noteReply(r, did.reply, false)
		h.shell.sessions.Put(r.Context(), sessionFlash, did.reply)
		redirect(w, r, fmt.Sprintf("/t/%d#m%d", t.ID, did.sent.Assistant.ID))
		return
	}
	h.notice(w, r, in, did.reply, views.GoalPanelOOB(t.ID, did.goal))
}

// goalPanel serves the thread's goal panel: GET /t/{id}/goal (the panel;
// with ?v=, the panel's poll) and POST /t/{id}/goal (its controls).
type goalPanel struct {
	store interface {
		threadReader
		goalStore
	}
	rt goalRuntime
}

// show serves GET /t/{id}/goal. A poll (?v=version&c=continuation) gets
// 204 when the goal has not changed, and a page reload when a continuation
// started since the page was drawn (its new messages are on the page then).
func (h *goalPanel) show(w http.ResponseWriter, r *http.Request) {
	u, t, ok := pathThread(w, r, h.store)
	if !ok {
		return
	}
	g, err := h.store.Goal(r.Context(), u.ID, t.ID)
	var gp *db.Goal
	switch {
	case errors.Is(err, db.ErrNotFound):
	case err != nil:
		serverError(w, r, err)
		return
	default:
		gp = &g
	}
	q := r.URL.Query()
	if q.Has("v") && gp != nil {
		if q.Get("v") == strconv.Itoa(g.Version) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if g.ContinuationRunID != nil && q.Get("c") != strconv.FormatInt(*g.ContinuationRunID, 10) {
			w.Header().Set("HX-Refresh", "true")
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	render(w, r, http.StatusOK, views.GoalPanel(t.ID, gp, ""))
}

// act serves POST /t/{id}/goal: action = budget (runs, tokens, minutes),
// pause, resume or clear.
func (h *goalPanel) act(w http.ResponseWriter, r *http.Request) {
	u, t, ok := pathThread(w, r, h.store)
	if !ok || !parseForm(w, r) {
		return
	}
	action := r.PostForm.Get("action")
	var b db.GoalBudget
	switch action {
	case "pause", "resume", "clear":
	case "budget":
		var ok bool
		if b, ok = parseGoalBudget(fmt.Sprintf("runs=%s tokens=%s minutes=%s",
			r.PostForm.Get("runs"), r.PostForm.Get("tokens"), r.PostForm.Get("minutes"))); !ok {
			h.refuse(w, r, u.ID, t, strings.TrimPrefix(goalBudgetUsage, "Write the budget as /goal budget runs=5 tokens=100000 minutes=20 (any of them): "))
			return
		}
	default:
		badRequest(w, r, "Unknown goal action.")
		return
	}
	did, err := goalAction(r.Context(), h.store, h.rt, u.ID, t, action, "", b)
	switch {
	case err != nil:
		storeError(w, r, err)
		return
	case did.refusal != "":
		h.refuse(w, r, u.ID, t, did.refusal)
		return
	case !isHTMX(r):
		redirect(w, r, fmt.Sprintf("/t/%d", t.ID))
		return
	case did.sent != nil:
		w.Header().Set("HX-Refresh", "true")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	render(w, r, http.StatusOK, views.GoalPanel(t.ID, did.goal, ""))
}

// refuse shows why a control was refused, on the panel.
func (h *goalPanel) refuse(w http.ResponseWriter, r *http.Request, user int64, t db.Thread, msg string) {
	if !isHTMX(r) {
		badRequest(w, r, msg)
		return
	}
	var gp *db.Goal
	if g, err := h.store.Goal(r.Context(), user, t.ID); err == nil {
		gp = &g
	}
	render(w, r, http.StatusUnprocessableEntity, views.GoalPanel(t.ID, gp, msg))
}
