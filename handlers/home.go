package handlers

import (
	"context"
	"net/http"
	"strconv"

	"weft/db"
	"weft/views"
)

type homeStore interface {
	Thread(ctx context.Context, user, id int64) (db.Thread, error)
	Roles(ctx context.Context, user int64) ([]db.Role, error)
	KBs(ctx context.Context, user, workspace int64) ([]db.KnowledgeBase, error)
}

// home serves GET /: the current workspace with a composer for a new thread.
// With ?from=thread (the /new command) the composer starts with that
// thread's model and role, and the new thread copies its settings.
type home struct {
	shell *shell
	store homeStore
	media attacher
}

func (h *home) show(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	ws, err := h.shell.currentWorkspace(r, u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	c := views.ComposerData{Model: h.shell.defaultModel(r.Context(), ws)}
	if from, err := strconv.ParseInt(r.URL.Query().Get("from"), 10, 64); err == nil {
		if t, err := h.store.Thread(r.Context(), u.ID, from); err == nil {
			c.From, c.RoleID = t.ID, t.RoleID
			if t.Model != "" {
				c.Model = t.Model
			}
		}
	}
	h.render(w, r, http.StatusOK, u, ws, c)
}

// render shows the home page of ws with the composer c (also used to give a
// refused first message back with its error).
func (h *home) render(w http.ResponseWriter, r *http.Request, status int, u db.User, ws db.Workspace, c views.ComposerData) {
	s, err := h.shell.build(r.Context(), u, ws, 0, ws.Name)
	if err != nil {
		serverError(w, r, err)
		return
	}
	if c.Roles, err = h.store.Roles(r.Context(), u.ID); err != nil {
		serverError(w, r, err)
		return
	}
	if c.KBs, err = h.store.KBs(r.Context(), u.ID, ws.ID); err != nil {
		serverError(w, r, err)
		return
	}
	c.Action, c.WorkspaceID, c.Models, c.ModelWhere = "/t", ws.ID, s.Models, s.ModelWhere
	if err := h.shell.agent.composer(r.Context(), u.ID, ws, nil, &c); err != nil {
		serverError(w, r, err)
		return
	}
	lim := h.media.Limits()
	c.MaxFiles, c.MaxFileBytes = lim.MaxFiles, lim.MaxFileBytes
	render(w, r, status, views.Page(ws.Name, views.App(s, views.Home(ws, c))))
}
