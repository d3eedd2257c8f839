package handlers

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/alexedwards/scs/v2"

	"weft/db"
	"weft/views"
)

type workspaceStore interface {
	Workspace(ctx context.Context, user, id int64) (db.Workspace, error)
	Workspaces(ctx context.Context, user int64) ([]db.Workspace, error)
	CreateWorkspace(ctx context.Context, user int64, name string) (db.Workspace, error)
	RenameWorkspace(ctx context.Context, user, id int64, name string) error
	SetWorkspaceArchived(ctx context.Context, user, id int64, archived bool) error
	SetWorkspaceModel(ctx context.Context, user, id int64, model string) error
}

// workspaces serves /workspaces: list, create, rename, archive, switch.
type workspaces struct {
	store    workspaceStore
	shell    *shell
	sessions *scs.SessionManager
}

func (h *workspaces) list(w http.ResponseWriter, r *http.Request) {
	h.renderList(w, r, http.StatusOK, "")
}

func (h *workspaces) renderList(w http.ResponseWriter, r *http.Request, status int, msg string) {
	u, _ := currentUser(r)
	ws, err := h.shell.currentWorkspace(r, u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	s, err := h.shell.build(r.Context(), u, ws, 0, "Workspaces")
	if err != nil {
		serverError(w, r, err)
		return
	}
	render(w, r, status, views.Page("Workspaces", views.App(s, views.WorkspacesPage(s.Workspaces, s.Models, msg))))
}

// workspaceName validates a name from the form, answering the request when
// it is not acceptable.
func (h *workspaces) workspaceName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := strings.Join(strings.Fields(r.PostForm.Get("name")), " ")
	if name == "" || utf8.RuneCountInString(name) > 100 {
		h.renderList(w, r, http.StatusUnprocessableEntity, "A workspace name needs 1 to 100 characters.")
		return "", false
	}
	return name, true
}

func (h *workspaces) create(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	if !parseForm(w, r) {
		return
	}
	name, ok := h.workspaceName(w, r)
	if !ok {
		return
	}
	ws, err := h.store.CreateWorkspace(r.Context(), u.ID, name)
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.sessions.Put(r.Context(), sessionWorkspaceID, ws.ID)
	redirect(w, r, "/")
}

func (h *workspaces) rename(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	name, ok := h.workspaceName(w, r)
	if !ok {
		return
	}
	if err := h.store.RenameWorkspace(r.Context(), u.ID, id, name); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, "/workspaces")
}

// archive archives or restores a workspace. Its threads are kept either way.
func (h *workspaces) archive(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	archived, ok := formBool(r, "archived")
	if !ok {
		badRequest(w, r, "Say archived=true or archived=false.")
		return
	}
	ws, err := h.store.Workspace(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	if ws.IsDefault && archived {
		h.renderList(w, r, http.StatusUnprocessableEntity, "The default workspace cannot be archived.")
		return
	}
	if err := h.store.SetWorkspaceArchived(r.Context(), u.ID, id, archived); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, "/workspaces")
}

// switchTo makes a workspace the current one for this session.
func (h *workspaces) switchTo(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	if !parseForm(w, r) {
		return
	}
	id, err := strconv.ParseInt(r.PostForm.Get("workspace_id"), 10, 64)
	if err != nil {
		notFound(w, r)
		return
	}
	ws, err := h.store.Workspace(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	if ws.Archived() {
		h.renderList(w, r, http.StatusUnprocessableEntity, "That workspace is archived. Restore it to open it.")
		return
	}
	h.sessions.Put(r.Context(), sessionWorkspaceID, ws.ID)
	redirect(w, r, "/")
}

// setModel sets the model new threads of a workspace start with (field
// model: one of the chat models, or empty for the instance's default).
// A thread's own model still wins.
func (h *workspaces) setModel(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	if _, err := h.store.Workspace(r.Context(), u.ID, id); err != nil {
		storeError(w, r, err)
		return
	}
	model := strings.TrimSpace(r.PostForm.Get("model"))
	if model != "" && !slices.Contains(h.shell.models.ChatModels(r.Context()), model) {
		h.renderList(w, r, http.StatusUnprocessableEntity, "Choose one of the chat models the model server has.")
		return
	}
	if err := h.store.SetWorkspaceModel(r.Context(), u.ID, id, model); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, "/workspaces")
}
