package handlers

import (
	"context"
	"net/http"

	"weft/db"
	"weft/views"
)

type settingsStore interface {
	Setting(ctx context.Context, key, def string) (string, error)
	SetSetting(ctx context.Context, key, value string) error
}

// admin serves /admin: instance settings, for administrators only.
type admin struct {
	store settingsStore
	shell *shell
}

func (h *admin) show(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	mode, err := h.store.Setting(r.Context(), "signup_mode", db.SignupOpen)
	if err != nil {
		serverError(w, r, err)
		return
	}
	ws, err := h.shell.currentWorkspace(r, u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	s, err := h.shell.build(r.Context(), u, ws, 0, "Administration")
	if err != nil {
		serverError(w, r, err)
		return
	}
	render(w, r, http.StatusOK, views.Page("Administration", views.App(s, views.AdminPage(mode, r.URL.Query().Has("saved")))))
}

func (h *admin) setSignup(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	mode := r.PostForm.Get("mode")
	if mode != db.SignupOpen && mode != db.SignupClosed {
		badRequest(w, r, "Sign-up is either open or closed.")
		return
	}
	if err := h.store.SetSetting(r.Context(), "signup_mode", mode); err != nil {
		serverError(w, r, err)
		return
	}
	redirect(w, r, "/admin?saved")
}
