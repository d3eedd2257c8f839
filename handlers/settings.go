package handlers

import (
	"context"
	"net/http"

	"github.com/a-h/templ"

	"weft/views"
)

type instructionsStore interface {
	Instructions(ctx context.Context, user int64) (string, error)
	SetInstructions(ctx context.Context, user int64, s string) error
}

// settings serves /settings: the user's own settings, and their account
// (password, sessions).
type settings struct {
	store   instructionsStore
	shell   *shell
	account *account
	tokens  *tokenPages
}

func (h *settings) show(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "")
}

// render draws /settings, with an error of the account part.
func (h *settings) render(w http.ResponseWriter, r *http.Request, status int, accountErr string) {
	h.renderWith(w, r, status, accountErr, nil, "")
}

// renderTokens draws /settings with the API tokens part's new token or
// error.
// An htmx request (the create form) gets the part alone, so that a reload
// is a GET of /settings, which never shows the token again.
func (h *settings) renderTokens(w http.ResponseWriter, r *http.Request, status int, created *views.CreatedToken, tokenErr string) {
	if !isHTMX(r) {
		h.renderWith(w, r, status, "", created, tokenErr)
		return
	}
	toks, err := h.tokens.section(r, created, tokenErr)
	if err != nil {
		serverError(w, r, err)
		return
	}
	render(w, r, status, views.TokensPart(toks))
}

func (h *settings) renderWith(w http.ResponseWriter, r *http.Request, status int, accountErr string, created *views.CreatedToken, tokenErr string) {
	u, _ := currentUser(r)
	text, err := h.store.Instructions(r.Context(), u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	acc, err := h.account.section(r, accountErr)
	if err != nil {
		serverError(w, r, err)
		return
	}
	toks, err := h.tokens.section(r, created, tokenErr)
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.shell.page(w, r, status, "Settings", templ.Join(views.SettingsPage(text, r.URL.Query().Has("saved")), views.AccountPart(acc),
		views.TokensPart(toks)))
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

// changePassword is the account part's password form.
func (h *settings) changePassword(w http.ResponseWriter, r *http.Request) {
	h.account.changePassword(w, r, func(status int, msg string) { h.render(w, r, status, msg) })
}
