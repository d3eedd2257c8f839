package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"weft/db"
	"weft/views"
)

// agentName is what an agent may be called (room_agents.name's check): it
// is mentioned as @name.
var agentName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,31}$`)

// Tool policy modes an agent's policy may set.
var agentPolicyModes = []string{"auto", "ask", "deny"}

// addAgent serves POST /rooms/{id}/agents (fields name, model, prompt,
// the generation settings, tools, policy_TOOL, kb).
func (h *roomPages) addAgent(w http.ResponseWriter, r *http.Request) {
	u, room, ok := h.ownedRoom(w, r)
	if !ok || !parseForm(w, r) {
		return
	}
	var p views.RoomPage
	if err := h.ownerChoices(r.Context(), u.ID, room, &p); err != nil {
		serverError(w, r, err)
		return
	}
	f, in, msg := parseAgent(r, p.Models, p.Tools, "")
	if msg == "" {
		_, err := h.store.AddRoomAgent(r.Context(), u.ID, room.ID, in)
		if msg = agentConflict(err, in.Name); msg == "" && err != nil {
			storeError(w, r, err)
			return
		}
	}
	if msg != "" {
		h.renderRoom(w, r, http.StatusUnprocessableEntity, u, room, views.RoomForms{Agent: f, AgentError: msg})
		return
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, fmt.Sprintf("@%s joined the room.", in.Name))
	redirect(w, r, roomURL(room.ID))
}

// agentConflict is the message for a name the room already has.
func agentConflict(err error, name string) string {
	if errors.Is(err, db.ErrConflict) {
		return fmt.Sprintf("The room already has an agent named @%s (names are compared without case).", name)
	}
	return ""
}

// roomAgent reads {agent} among the room's agents (a 404 otherwise).
func (h *roomPages) roomAgent(w http.ResponseWriter, r *http.Request, u db.User, room db.Room) (db.RoomAgent, bool) {
	id, ok := pathID(w, r, "agent")
	if !ok {
		return db.RoomAgent{}, false
	}
	agents, err := h.store.RoomAgents(r.Context(), u.ID, room.ID)
	if err != nil {
		storeError(w, r, err)
		return db.RoomAgent{}, false
	}
	for _, a := range agents {
		if a.ID == id {
			return a, true
		}
	}
	notFound(w, r)
	return db.RoomAgent{}, false
}

// showAgent serves GET /rooms/{id}/agents/{agent}: the owner's form of one
// agent.
func (h *roomPages) showAgent(w http.ResponseWriter, r *http.Request) {
	u, room, ok := h.ownedRoom(w, r)
	if !ok {
		return
	}
	a, ok := h.roomAgent(w, r, u, room)
	if !ok {
		return
	}
	h.renderAgent(w, r, http.StatusOK, u, room, a, views.AgentFormOf(a), "")
}

func (h *roomPages) renderAgent(w http.ResponseWriter, r *http.Request, status int, u db.User, room db.Room, a db.RoomAgent, f views.AgentForm, msg string) {
	var p views.RoomPage
	if err := h.ownerChoices(r.Context(), u.ID, room, &p); err != nil {
		serverError(w, r, err)
		return
	}
	h.shell.page(w, r, status, "@"+a.Name, views.RoomAgentPage(room, a, f, msg, p.Models, p.KBs, p.Tools))
}

// updateAgent serves POST /rooms/{id}/agents/{agent} (the fields of
// addAgent).
func (h *roomPages) updateAgent(w http.ResponseWriter, r *http.Request) {
	u, room, ok := h.ownedRoom(w, r)
	if !ok || !parseForm(w, r) {
		return
	}
	a, ok := h.roomAgent(w, r, u, room)
	if !ok {
		return
	}
	var p views.RoomPage
	if err := h.ownerChoices(r.Context(), u.ID, room, &p); err != nil {
		serverError(w, r, err)
		return
	}
	f, in, msg := parseAgent(r, p.Models, p.Tools, a.Model)
	if msg == "" {
		_, err := h.store.UpdateRoomAgent(r.Context(), u.ID, room.ID, a.ID, in)
		if msg = agentConflict(err, in.Name); msg == "" && err != nil {
			storeError(w, r, err)
			return
		}
	}
	if msg != "" {
		h.renderAgent(w, r, http.StatusUnprocessableEntity, u, room, a, f, msg)
		return
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, fmt.Sprintf("@%s was saved.", in.Name))
	redirect(w, r, roomURL(room.ID))
}

// deleteAgent serves POST /rooms/{id}/agents/{agent}/delete: its answers
// stay (with its name); those still queued or running are cancelled.
func (h *roomPages) deleteAgent(w http.ResponseWriter, r *http.Request) {
	u, room, ok := h.ownedRoom(w, r)
	if !ok {
		return
	}
	a, ok := h.roomAgent(w, r, u, room)
	if !ok {
		return
	}
	if err := h.stopRuns(r.Context(), room, 0, a.ID); err != nil {
		serverError(w, r, err)
		return
	}
	if err := h.store.DeleteRoomAgent(r.Context(), u.ID, room.ID, a.ID); err != nil {
		storeError(w, r, err)
		return
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, fmt.Sprintf("@%s left the room.", a.Name))
	redirect(w, r, roomURL(room.ID))
}

// parseAgent reads an agent's form. The model must be one of the
// catalogue's (or current, the agent's model now, kept even while its
// server is away); the policy names only tools of tools. msg says what is
// wrong (empty: nothing).
func parseAgent(r *http.Request, models, tools []string, current string) (f views.AgentForm, in db.RoomAgentInput, msg string) {
	get := func(k string) string { return strings.TrimSpace(r.PostForm.Get(k)) }
	f.RoleForm = views.RoleForm{Name: get("name"), Prompt: get("prompt"), Temperature: get("temperature"), TopP: get("top_p"),
		TopK: get("top_k"), RepeatPenalty: get("repeat_penalty"), Seed: get("seed"), NumCtx: get("num_ctx"),
		NumPredict: get("num_predict"), Stop: strings.ReplaceAll(r.PostForm.Get("stop"), "\r\n", "\n")}
	f.Model, f.Tools = get("model"), r.PostForm.Get("tools") == "on"
	f.Policy, f.KBs = map[string]string{}, map[int64]bool{}
	in = db.RoomAgentInput{Name: f.Name, Model: f.Model, Prompt: f.Prompt, Tools: f.Tools, ToolPolicy: map[string]string{}}
	for _, t := range tools {
		mode := get("policy_" + t)
		if mode == "" {
			continue
		}
		f.Policy[t] = mode
		if !slices.Contains(agentPolicyModes, mode) {
			return f, in, fmt.Sprintf("The policy for %s is auto, ask or deny.", t)
		}
		in.ToolPolicy[t] = mode
	}
	for _, v := range r.PostForm["kb"] {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			return f, in, "The knowledge bases could not be read."
		}
		f.KBs[id] = true
		in.KBs = append(in.KBs, id)
	}
	switch {
	case !agentName.MatchString(in.Name):
		return f, in, "An agent's name is a letter, then up to 31 letters, digits, _ or - (members mention it as @name)."
	case in.Model == "" || (!slices.Contains(models, in.Model) && in.Model != current):
		return f, in, "Choose the agent's model from the list."
	case utf8.RuneCountInString(in.Prompt) > maxPromptRunes:
		return f, in, "The prompt is longer than 20,000 characters."
	}
	if errs := parseParams(f.RoleForm, &in.Params); len(errs) > 0 {
		return f, in, "Not saved: " + strings.Join(errs, "; ") + "."
	}
	return f, in, ""
}
