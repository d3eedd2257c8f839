package handlers

import (
	"net/http"

	"weft/views"
)

// home serves GET /: the current workspace with a composer for a new thread.
type home struct{ shell *shell }

func (h *home) show(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	ws, err := h.shell.currentWorkspace(r, u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	s, err := h.shell.build(r.Context(), u, ws, 0, ws.Name)
	if err != nil {
		serverError(w, r, err)
		return
	}
	c := views.ComposerData{Action: "/t", WorkspaceID: ws.ID, Models: s.Models, Model: h.shell.defaultModel(r.Context(), ws)}
	render(w, r, http.StatusOK, views.Page(ws.Name, views.App(s, views.Home(ws, c))))
}
