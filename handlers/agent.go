package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"weft/agent"
	"weft/db"
	"weft/views"
)

type agentStore interface {
	ToolPolicies(ctx context.Context, user, workspace int64) (map[string]db.ToolPolicy, error)
	ThreadGrants(ctx context.Context, user, thread int64) (map[string]bool, error)
	SetToolPolicy(ctx context.Context, user, workspace int64, tool string, enabled bool, mode string) error
	SetAgentMaxSteps(ctx context.Context, user, workspace int64, n int) error
	Workspace(ctx context.Context, user, id int64) (db.Workspace, error)
	Thread(ctx context.Context, user, id int64) (db.Thread, error)
	StepOf(ctx context.Context, user, id int64) (db.Step, db.Run, error)
	StepsOfMessages(ctx context.Context, user int64, msgs []int64) (map[int64]db.RunSteps, error)
	AgentRuns(ctx context.Context, user, thread int64, limit int) ([]db.RunSteps, error)
	ResumeRun(ctx context.Context, user, run int64) (db.Run, error)
}

type toolModels interface {
	Supports(ctx context.Context, name, capability string) (has, known bool)
}

type agentRunner interface {
	Tools() []agent.Tool
	Root(ws db.Workspace) string
	ExplainAll(rules map[string]db.ToolPolicy, grants map[string]bool, model string, modelTools, modelKnown bool) []agent.Availability
	Decide(ctx context.Context, user, step int64, decision string) (db.Step, error)
	AnswerQuestion(ctx context.Context, user, step int64, answers []string, get func(ctx context.Context, user, id int64) (db.Step, db.Run, error)) (db.Step, error)
	Skills(ctx context.Context, user int64, ws db.Workspace) ([]agent.Skill, error)
}

type resumer interface {
	Resume(ctx context.Context, user, run int64) (db.Run, error)
}

// agentTools judges tool availability and fills the composer's agent part:
// the shell fills every composer with it and the agent's pages are built
// on it, so it is built before both.
type agentTools struct {
	store  agentStore
	ag     agentRunner
	models toolModels
	// web says why web search is unavailable ("" when it is available):
	// the composer's "Search the web" switch shows the same reason as the
	// web_search tool.
	web interface{ WebSearchUnavailable() string }
}

// agentPages serves the agent's pages and actions: tool settings,
// approvals, answers to questions, resuming, and the debug view.
type agentPages struct {
	*agentTools
	shell *shell
	rt    resumer
}

// toolStates is the one projection of tool availability, as every page
// shows it (thread 0: no thread grants; model agent.AnyModel: the tools
// alone, as the settings page judges them).
func (h *agentTools) toolStates(ctx context.Context, user int64, ws db.Workspace, thread int64, model string) ([]views.ToolState, error) {
	rules, err := h.store.ToolPolicies(ctx, user, ws.ID)
	if err != nil {
		return nil, err
	}
	grants := map[string]bool{}
	if thread != 0 {
		if grants, err = h.store.ThreadGrants(ctx, user, thread); err != nil {
			return nil, err
		}
	}
	has, known := false, false
	if model != "" && model != agent.AnyModel {
		has, known = h.models.Supports(ctx, model, "tools")
	}
	list := h.ag.ExplainAll(rules, grants, model, has, known)
	out := make([]views.ToolState, len(list))
	for i, av := range list {
		out[i] = views.ToolState{Name: av.Tool.Name, Description: av.Tool.Description, Class: string(av.Tool.Class), Origin: av.Tool.Origin,
			Enabled: av.Enabled, Mode: av.Mode, Rule: av.Rule, Available: av.Available, Asks: av.Asks, Reason: av.Reason}
	}
	return out, nil
}

// composer fills the composer's agent part.
func (h *agentTools) composer(ctx context.Context, user int64, ws db.Workspace, t *db.Thread, c *views.ComposerData) error {
	var thread int64
	if t != nil {
		thread, c.Agent, c.Web = t.ID, t.AgentEnabled, t.WebSearch
	}
	if c.WebOff = h.web.WebSearchUnavailable(); c.WebOff != "" {
		c.Web = false
	}
	c.AgentRoot = h.ag.Root(ws)
	var err error
	c.Tools, err = h.toolStates(ctx, user, ws, thread, c.Model)
	return err
}

// settings serves GET /tools: the current workspace's tool governance.
func (h *agentPages) settings(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	ws, err := h.shell.currentWorkspace(r, u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.renderSettings(w, r, http.StatusOK, u.ID, ws, r.URL.Query().Has("saved"), "")
}

func (h *agentPages) renderSettings(w http.ResponseWriter, r *http.Request, status int, user int64, ws db.Workspace, saved bool, msg string) {
	tools, err := h.toolStates(r.Context(), user, ws, 0, agent.AnyModel)
	if err != nil {
		serverError(w, r, err)
		return
	}
	skills, err := h.skillStates(r.Context(), user, ws)
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.shell.page(w, r, status, "Tools", views.ToolSettingsPage(views.ToolSettings{
		Workspace: ws, Root: h.ag.Root(ws), Tools: tools, Saved: saved, Error: msg, Skills: skills}))
}

// saveSettings serves POST /tools.
func (h *agentPages) saveSettings(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	if !parseForm(w, r) {
		return
	}
	wsID, err := strconv.ParseInt(r.PostForm.Get("workspace_id"), 10, 64)
	if err != nil {
		notFound(w, r)
		return
	}
	ws, err := h.store.Workspace(r.Context(), u.ID, wsID)
	if err != nil {
		storeError(w, r, err)
		return
	}
	steps, err := strconv.Atoi(r.PostForm.Get("max_steps"))
	if err != nil || steps < 1 || steps > 200 {
		h.renderSettings(w, r, http.StatusUnprocessableEntity, u.ID, ws, false, "The step limit must be a whole number from 1 to 200.")
		return
	}
	// Tools come and go with their MCP servers: a tool the form did not
	// show (it appeared after the page was served) keeps its rule.
	tools := h.ag.Tools()
	shown := tools[:0:0]
	for _, t := range tools {
		if r.PostForm.Has("mode_" + t.Name) {
			shown = append(shown, t)
		}
	}
	for _, t := range shown {
		mode := r.PostForm.Get("mode_" + t.Name)
		if mode != agent.ModeAuto && mode != agent.ModeAsk && mode != agent.ModeDeny {
			h.renderSettings(w, r, http.StatusUnprocessableEntity, u.ID, ws, false, fmt.Sprintf("Choose a mode for %s.", t.Name))
			return
		}
	}
	for _, t := range shown {
		enabled := r.PostForm.Get("enabled_"+t.Name) == "on"
		if err := h.store.SetToolPolicy(r.Context(), u.ID, ws.ID, t.Name, enabled, r.PostForm.Get("mode_"+t.Name)); err != nil {
			storeError(w, r, err)
			return
		}
	}
	if err := h.saveSkills(r.Context(), u.ID, ws, r.PostForm); err != nil {
		storeError(w, r, err)
		return
	}
	if err := h.store.SetAgentMaxSteps(r.Context(), u.ID, ws.ID, steps); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/tools?w=%d&saved=1", ws.ID))
}

// decide serves POST /steps/{id}/decide: an approval's answer.
func (h *agentPages) decide(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	_, err := h.ag.Decide(r.Context(), u.ID, id, r.PostForm.Get("decision"))
	h.settled(w, r, u.ID, id, err)
}

// answer serves POST /steps/{id}/answer: the answers to a question, one
// field a0…a3 per question.
func (h *agentPages) answer(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	var answers []string
	for i := range 4 {
		if v, ok := r.PostForm["a"+strconv.Itoa(i)]; ok && len(v) > 0 {
			answers = append(answers, v[0])
		}
	}
	_, err := h.ag.AnswerQuestion(r.Context(), u.ID, id, answers, h.store.StepOf)
	h.settled(w, r, u.ID, id, err)
}

func (h *agentPages) settled(w http.ResponseWriter, r *http.Request, user, id int64, err error) {
	switch {
	case errors.Is(err, agent.ErrBadDecision):
		badRequest(w, r, "The decision must be once, thread, always or deny.")
		return
	case errors.Is(err, agent.ErrBadAnswer):
		badRequest(w, r, "Choose one of the options for every question.")
		return
	case errors.Is(err, db.ErrDecided):
		// Answered already (another tab, the timeout, or Stop): show the
		// thread as it is.
	case err != nil:
		storeError(w, r, err)
		return
	}
	if isHTMX(r) {
		w.WriteHeader(http.StatusNoContent) // the run's stream shows the outcome
		return
	}
	_, run, err := h.store.StepOf(r.Context(), user, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d", run.ThreadID))
}

// resume serves POST /runs/{id}/resume: an interrupted agent run goes on
// from its last checkpoint.
func (h *agentPages) resume(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	run, err := h.rt.Resume(r.Context(), u.ID, id)
	if errors.Is(err, db.ErrNotResumable) {
		badRequest(w, r, "Only an agent answer interrupted by a server stop can be resumed.")
		return
	}
	if err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d#m%d", run.ThreadID, *run.AssistantMessageID))
}

// debug serves GET /t/{id}/debug.
func (h *agentPages) debug(w http.ResponseWriter, r *http.Request) {
	u, t, ok := pathThread(w, r, h.store)
	if !ok {
		return
	}
	list, err := h.store.AgentRuns(r.Context(), u.ID, t.ID, 50)
	if err != nil {
		serverError(w, r, err)
		return
	}
	runs := make([]views.DebugRun, len(list))
	for i, rs := range list {
		runs[i] = views.DebugRun{Run: rs.Run, Steps: rs.Steps}
	}
	h.shell.page(w, r, http.StatusOK, "Debug", views.DebugPage(t, runs))
}
