package handlers

import (
	"context"
	"net/http"

	"weft/views"
)

type instructionsStore interface {
	Instructions(ctx context.Context, user int64) (string, error)
	SetInstructions(ctx context.Context, user int64, s string) error
}

// settings serves /settings: the user's own settings.
type settings struct {
	store instructionsStore
	shell *shell
}

func (h *settings) show(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	text, err := h.store.Instructions(r.Context(), u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.shell.page(w, r, http.StatusOK, "Settings", views.SettingsPage(text, r.URL.Query().Has("saved")))
}

func (h *settings) setInstructions(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	if !parseForm(w, r) {
		return
	}
	text, ok := longText(w, r, "instructions", "Custom instructions")
	if !ok {
		return
	}
	if err := h.store.SetInstructions(r.Context(), u.ID, text); err != nil {
		serverError(w, r, err)
		return
	}
	redirect(w, r, "/settings?saved")
}
