package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"weft/agent"
	"weft/chat"
	"weft/db"
	"weft/views"
)

// Rooms (issue 20): /rooms lists the user's rooms and makes new ones;
// /rooms/{id} is a room's page. Every room route reads the room through
// pathRoom (db.RoomForMember): a room the user is not a member of is a
// 404, for every route. Changes are the owner's (ownedRoom: a member gets
// a 403 that says so), except leaving. The room's thread is worked on as
// its owner (room.OwnerID) by the thread machinery, after these checks.
// Members: rooms_members.go; agents: rooms_agents.go; settings and
// deleting: rooms_settings.go; the thread routes' guard: rooms_hide.go.

// roomStore is what the room pages read and change.
type roomStore interface {
	bodyStore
	RoomForMember(ctx context.Context, user, room int64) (db.Room, error)
	RoomMembers(ctx context.Context, user, room int64) ([]db.RoomPerson, error)
	RoomAgents(ctx context.Context, user, room int64) ([]db.RoomAgent, error)
	MemberRooms(ctx context.Context, user int64, limit int) ([]db.RoomSummary, error)
	CreateRoom(ctx context.Context, user, workspace int64, name string) (db.Room, error)
	Workspaces(ctx context.Context, user int64) ([]db.Workspace, error)
	Workspace(ctx context.Context, user, id int64) (db.Workspace, error)
	KBs(ctx context.Context, user, workspace int64) ([]db.KnowledgeBase, error)
	InviteRoomMember(ctx context.Context, owner, room int64, email string) (db.RoomPerson, error)
	RemoveRoomMember(ctx context.Context, owner, room, member int64) error
	LeaveRoom(ctx context.Context, user, room int64) error
	RoomRunsToStop(ctx context.Context, owner, room, member, agent int64) ([]int64, error)
	AddRoomAgent(ctx context.Context, owner, room int64, in db.RoomAgentInput) (db.RoomAgent, error)
	UpdateRoomAgent(ctx context.Context, owner, room, agent int64, in db.RoomAgentInput) (db.RoomAgent, error)
	DeleteRoomAgent(ctx context.Context, owner, room, agent int64) error
	UpdateRoomSettings(ctx context.Context, owner, room int64, s db.RoomSettings) error
	NoteRoomChanged(ctx context.Context, thread int64) error
}

// roomRuntime is the conversation runtime as the room pages use it.
type roomRuntime interface {
	RoomView(ctx context.Context, user int64, room db.Room, before int64) (chat.RoomView, error)
	RoomSend(ctx context.Context, user int64, room db.Room, content string) (chat.RoomSent, error)
	DeleteThread(ctx context.Context, user, thread int64) ([]string, error)
	Cancel(ctx context.Context, user, run int64) (db.Run, error)
}

// roomPages serves /rooms and a room's pages and actions.
type roomPages struct {
	store roomStore
	shell *shell
	rt    roomRuntime
	tools *agentTools // the tools an agent's policy can narrow
	blobs interface {
		Release(ctx context.Context, shas []string)
	}
}

// roomsListed caps /rooms (nobody is in more rooms than this).
const roomsListed = 1000

// maxRoomName is the longest room name (rooms.name's check).
const maxRoomName = 120

// list serves GET /rooms.
func (h *roomPages) list(w http.ResponseWriter, r *http.Request) {
	h.renderList(w, r, http.StatusOK, views.RoomsList{})
}

func (h *roomPages) renderList(w http.ResponseWriter, r *http.Request, status int, p views.RoomsList) {
	u, _ := currentUser(r)
	ctx := r.Context()
	var err error
	if p.Rooms, err = h.store.MemberRooms(ctx, u.ID, roomsListed); err != nil {
		serverError(w, r, err)
		return
	}
	all, err := h.store.Workspaces(ctx, u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	for _, ws := range all {
		if !ws.Archived() {
			p.Workspaces = append(p.Workspaces, ws)
		}
	}
	if p.WorkspaceID == 0 {
		ws, err := h.shell.currentWorkspace(r, u.ID)
		if err != nil {
			serverError(w, r, err)
			return
		}
		p.WorkspaceID = ws.ID
	}
	h.shell.page(w, r, status, "Rooms", views.RoomsPage(p))
}

// create serves POST /rooms (fields name, workspace_id): the new room's
// page follows.
func (h *roomPages) create(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	if !parseForm(w, r) {
		return
	}
	name := oneLine(r.PostForm.Get("name"))
	ws, _ := strconv.ParseInt(r.PostForm.Get("workspace_id"), 10, 64)
	if name == "" || utf8.RuneCountInString(name) > maxRoomName {
		h.renderList(w, r, http.StatusUnprocessableEntity, views.RoomsList{Name: name, WorkspaceID: ws,
			Error: "A room needs a name of 1 to 120 characters."})
		return
	}
	if ws == 0 {
		cur, err := h.shell.currentWorkspace(r, u.ID)
		if err != nil {
			serverError(w, r, err)
			return
		}
		ws = cur.ID
	}
	room, err := h.store.CreateRoom(r.Context(), u.ID, ws, name)
	if err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, roomURL(room.ID))
}

// oneLine is form text as one line: trimmed, inner whitespace runs as one
// space, no invalid UTF-8 or NUL.
func oneLine(s string) string { return strings.Join(strings.Fields(cleanText(s)), " ") }

func roomURL(room int64) string { return "/rooms/" + strconv.FormatInt(room, 10) }

// pathRoom reads the room of {id} for the signed-in user: a room they are
// not a member of is a 404 (answered here).
func (h *roomPages) pathRoom(w http.ResponseWriter, r *http.Request) (db.User, db.Room, bool) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return u, db.Room{}, false
	}
	room, err := h.store.RoomForMember(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return u, db.Room{}, false
	}
	return u, room, true
}

// ownedRoom is pathRoom for the owner's actions: a member is refused with
// a 403 that says why (they know the room; nothing is hidden from them).
func (h *roomPages) ownedRoom(w http.ResponseWriter, r *http.Request) (db.User, db.Room, bool) {
	u, room, ok := h.pathRoom(w, r)
	if ok && !room.IsOwner() {
		errorPage(w, r, http.StatusForbidden, "Only the room's owner can change its members, agents and settings.")
		return u, room, false
	}
	return u, room, ok
}

// show serves GET /rooms/{id}.
func (h *roomPages) show(w http.ResponseWriter, r *http.Request) {
	u, room, ok := h.pathRoom(w, r)
	if !ok {
		return
	}
	h.renderRoom(w, r, http.StatusOK, u, room, views.RoomForms{})
}

// renderRoom draws a room's page; forms carries a refused form back.
func (h *roomPages) renderRoom(w http.ResponseWriter, r *http.Request, status int, u db.User, room db.Room, forms views.RoomForms) {
	ctx := r.Context()
	p := views.RoomPage{Room: room, Me: u.ID, Forms: forms}
	var err error
	if p.Members, err = h.store.RoomMembers(ctx, u.ID, room.ID); err != nil {
		storeError(w, r, err)
		return
	}
	v, err := h.rt.RoomView(ctx, u.ID, room, 0)
	if err != nil {
		storeError(w, r, err)
		return
	}
	p.Room, p.Agents, p.More, p.Queue = v.Room, v.Agents, v.More, v.Queue
	room = v.Room
	p.Messages = make([]views.MessageView, len(v.Messages))
	for i, it := range v.Messages {
		p.Messages[i] = views.MessageView{MessageItem: it}
	}
	// The answers' stored renderings are the thread's, read as its owner.
	fillBodies(ctx, h.store, room.OwnerID, p.Messages)
	if room.IsOwner() {
		if err := h.ownerChoices(ctx, u.ID, room, &p); err != nil {
			serverError(w, r, err)
			return
		}
		if p.Forms.Settings == (views.RoomSettingsForm{}) {
			p.Forms.Settings = views.RoomSettingsFormOf(room)
		}
		if p.Forms.Agent.Model == "" && p.Forms.AgentError == "" {
			p.Forms.Agent.Model = h.shell.models.Default(ctx)
		}
	}
	ws, err := h.shell.currentWorkspace(r, u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	sh, err := h.shell.build(ctx, u, ws, 0, room.Name)
	if err != nil {
		serverError(w, r, err)
		return
	}
	sh.ActiveRoom = room.ID
	render(w, r, status, views.Page(room.Name, views.App(sh, views.Room(p))))
}

// ownerChoices fills what the owner's forms offer: the chat models, their
// knowledge bases of the room's workspace, and the tools and skills an
// agent's policy can narrow.
func (h *roomPages) ownerChoices(ctx context.Context, owner int64, room db.Room, p *views.RoomPage) error {
	p.Models = h.shell.models.ChatModels(ctx)
	ws, err := h.store.Workspace(ctx, owner, room.WorkspaceID)
	if err != nil {
		return err
	}
	if p.KBs, err = h.store.KBs(ctx, owner, ws.ID); err != nil {
		return err
	}
	p.Tools, err = h.policyTools(ctx, owner, ws)
	return err
}

// policyTools lists the tool names (and skill:NAME rules) of the
// workspace's governance that an agent's policy can narrow.
func (h *roomPages) policyTools(ctx context.Context, owner int64, ws db.Workspace) ([]string, error) {
	states, err := h.tools.toolStates(ctx, owner, ws, 0, agent.AnyModel)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(states))
	for _, s := range states {
		out = append(out, s.Name)
	}
	skills, err := h.tools.ag.Skills(ctx, owner, ws)
	if err != nil {
		return nil, err
	}
	for _, s := range skills {
		if s.Problem == "" {
			out = append(out, agent.SkillRulePrefix+s.Name)
		}
	}
	return out, nil
}

// stopRuns cancels runs of the room (as its owner, whose thread it is)
// after a change that leaves nobody to decide them; a run that ended in
// between is no error.
func (h *roomPages) stopRuns(ctx context.Context, room db.Room, member, agentID int64) error {
	runs, err := h.store.RoomRunsToStop(ctx, room.OwnerID, room.ID, member, agentID)
	if err != nil {
		return err
	}
	for _, run := range runs {
		if _, err := h.rt.Cancel(ctx, room.OwnerID, run); err != nil && !errors.Is(err, db.ErrNotFound) {
			return err
		}
	}
	return nil
}
