package handlers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"weft/agent"
	"weft/db"
	"weft/views"
)

type hookStore interface {
	Workspace(ctx context.Context, user, id int64) (db.Workspace, error)
	WorkspaceHooks(ctx context.Context, user, workspace int64) ([]db.WorkspaceHook, error)
	AddWorkspaceHook(ctx context.Context, user int64, h db.WorkspaceHook) (db.WorkspaceHook, error)
	DeleteWorkspaceHook(ctx context.Context, user, id int64) (db.WorkspaceHook, error)
}

type hookChecker interface {
	CheckHookURL(raw string) error
	AdminHooks() []string
}

// hookPages serves /tools/hooks: a workspace owner's HTTP lifecycle hooks.
type hookPages struct {
	store hookStore
	ag    hookChecker
	shell *shell
}

// list serves GET /tools/hooks (the current workspace's).
func (h *hookPages) list(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	ws, err := h.shell.currentWorkspace(r, u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, u.ID, views.HooksPage{Workspace: ws})
}

func (h *hookPages) render(w http.ResponseWriter, r *http.Request, status int, user int64, p views.HooksPage) {
	var err error
	if p.Hooks, err = h.store.WorkspaceHooks(r.Context(), user, p.Workspace.ID); err != nil {
		storeError(w, r, err)
		return
	}
	p.Events, p.Admin = agent.HookEvents, h.ag.AdminHooks()
	h.shell.page(w, r, status, "Hooks", views.WorkspaceHooksPage(p))
}

// create serves POST /tools/hooks: a new hook, its secret shown once.
func (h *hookPages) create(w http.ResponseWriter, r *http.Request) {
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
	event, rawURL := r.PostForm.Get("event"), strings.TrimSpace(r.PostForm.Get("url"))
	p := views.HooksPage{Workspace: ws, FormEvent: event, FormURL: rawURL}
	timeout := 10.0
	if v := r.PostForm.Get("timeout"); v != "" {
		if timeout, err = strconv.ParseFloat(v, 64); err != nil || !(timeout >= 0.1 && timeout <= 60) { // NaN too
			p.Error = "The timeout must be a number of seconds from 0.1 to 60."
		}
	}
	switch {
	case p.Error != "":
	case !agent.ValidHookEvent(event):
		p.Error = "Choose one of the events, or every event."
	case len(rawURL) > 2000:
		p.Error = "The URL is too long."
	default:
		if err := h.ag.CheckHookURL(rawURL); err != nil {
			p.Error = err.Error()
		}
	}
	if p.Error != "" {
		h.render(w, r, http.StatusUnprocessableEntity, u.ID, p)
		return
	}
	hk, err := h.store.AddWorkspaceHook(r.Context(), u.ID, db.WorkspaceHook{WorkspaceID: ws.ID, Event: event, URL: rawURL,
		Secret: "whsec_" + rand.Text(), TimeoutMS: int(timeout * 1000)})
	if errors.Is(err, db.ErrHookLimit) {
		p.Error = fmt.Sprintf("A workspace has at most %d hooks: remove one first.", db.MaxWorkspaceHooks)
		h.render(w, r, http.StatusUnprocessableEntity, u.ID, p)
		return
	}
	if err != nil {
		storeError(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, u.ID, views.HooksPage{Workspace: ws, NewSecret: hk.Secret, NewID: hk.ID})
}

// delete serves POST /tools/hooks/{id}/delete.
func (h *hookPages) delete(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	hk, err := h.store.DeleteWorkspaceHook(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/tools/hooks?w=%d", hk.WorkspaceID))
}
