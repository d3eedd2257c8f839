package handlers

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"

	"weft/db"
	"weft/views"
)

type accountStore interface {
	UserByID(ctx context.Context, id int64) (db.User, error)
	UserSessions(ctx context.Context, user int64, current string) ([]db.UserSession, error)
	EndUserSessions(ctx context.Context, user int64, keep string) ([]string, error)
	EndUserSession(ctx context.Context, user, id int64) (string, error)
	SetPassword(ctx context.Context, user int64, hash, keep string) ([]string, error)
	PasswordResetUser(ctx context.Context, token string) (db.User, error)
	ResetPassword(ctx context.Context, token, hash string) (int64, []string, error)
	ReserveLoginAttempt(ctx context.Context, since time.Time, keys ...db.RateKey) ([]int64, error)
	ReleaseLoginAttempt(ctx context.Context, ids []int64) error
}

// account serves what every user does with their own account on
// /settings (change the password, see and end their sessions) and the
// password-reset links an administrator hands out (/reset/{token}).
type account struct {
	store    accountStore
	sessions *scs.SessionManager
	hashes   *hashPool
	streams  *streamRegistry
	// limit is the login limit: a wrong current password on /settings
	// counts as a failed sign-in of the account, so a session left open
	// cannot be used to guess the password faster than the sign-in page.
	limit LoginLimit
}

const (
	msgResetGone  = "This password-reset link was already used, has expired, was replaced by a newer one or its account is disabled. Ask your administrator for a new one."
	msgWrongPass  = "Your current password is not right; nothing was changed."
	msgPassSaved  = "Your password was changed. Your other sessions were signed out."
	msgOthersGone = "Your other sessions were signed out."
)

// section is the account part of /settings.
func (h *account) section(r *http.Request, errMsg string) (views.AccountSettings, error) {
	u, _ := currentUser(r)
	list, err := h.store.UserSessions(r.Context(), u.ID, h.sessions.Token(r.Context()))
	if err != nil {
		return views.AccountSettings{}, err
	}
	q := r.URL.Query()
	d := views.AccountSettings{Email: u.Email, Sessions: list, Error: errMsg}
	switch {
	case q.Has("password"):
		d.Notice = msgPassSaved
	case q.Has("signed-out"):
		d.Notice = msgOthersGone
	}
	return d, nil
}

// changePassword needs the current password; the new one ends every other
// session of the account.
func (h *account) changePassword(w http.ResponseWriter, r *http.Request, again func(status int, errMsg string)) {
	u, _ := currentUser(r)
	if !parseForm(w, r) {
		return
	}
	current, next := r.PostForm.Get("current_password"), r.PostForm.Get("new_password")
	if msg := validatePassword(next); msg != "" {
		again(http.StatusUnprocessableEntity, msg)
		return
	}
	if !h.checkCurrent(w, r, u, current, again) {
		return
	}
	hash, err := h.hashes.hash(r.Context(), next)
	if err != nil {
		hashError(w, r, err)
		return
	}
	ended, err := h.store.SetPassword(r.Context(), u.ID, hash, h.sessions.Token(r.Context()))
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.endStreams(ended)
	slog.InfoContext(r.Context(), "password changed", "user", u.ID, "sessions_ended", len(ended))
	redirect(w, r, "/settings?password#account")
}

// checkCurrent checks the account's current password (as it is now, not
// as the request began), counted against the account's login limit; false
// when it answered the request itself.
func (h *account) checkCurrent(w http.ResponseWriter, r *http.Request, u db.User, pw string, again func(int, string)) bool {
	reserved, err := h.store.ReserveLoginAttempt(r.Context(), time.Now().Add(-h.limit.Window),
		db.RateKey{Key: "email:" + strings.ToLower(u.Email), Max: h.limit.PerAccount})
	if errors.Is(err, db.ErrRateLimited) {
		w.Header().Set("Retry-After", "300")
		again(http.StatusTooManyRequests, msgRateLimited)
		return false
	}
	if err != nil {
		serverError(w, r, err)
		return false
	}
	fresh, err := h.store.UserByID(r.Context(), u.ID)
	if err != nil {
		serverError(w, r, err)
		return false
	}
	ok, err := h.hashes.check(r.Context(), fresh.PasswordHash, pw)
	if err != nil || ok { // not checked, or right: not a failure
		_ = h.store.ReleaseLoginAttempt(context.WithoutCancel(r.Context()), reserved)
	}
	if err != nil {
		hashError(w, r, err)
		return false
	}
	if !ok {
		again(http.StatusUnprocessableEntity, msgWrongPass)
	}
	return ok
}

// signOutOthers ends every session of the account but this one.
func (h *account) signOutOthers(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	ended, err := h.store.EndUserSessions(r.Context(), u.ID, h.sessions.Token(r.Context()))
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.endStreams(ended)
	redirect(w, r, "/settings?signed-out#account")
}

// signOutOne ends one of the account's sessions (this one included).
func (h *account) signOutOne(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	token, err := h.store.EndUserSession(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	h.endStreams([]string{token})
	if token == h.sessions.Token(r.Context()) {
		redirect(w, r, "/login")
		return
	}
	redirect(w, r, "/settings?signed-out#account")
}

func (h *account) endStreams(tokens []string) {
	for _, t := range tokens {
		h.streams.endSession(t)
	}
}

// showReset is a password-reset link: a form for the new password while
// the link is usable. Opening it changes nothing.
func (h *account) showReset(w http.ResponseWriter, r *http.Request) {
	u, err := h.store.PasswordResetUser(r.Context(), chi.URLParam(r, "token"))
	if errors.Is(err, db.ErrNotFound) {
		errorPage(w, r, http.StatusGone, msgResetGone)
		return
	}
	if err != nil {
		serverError(w, r, err)
		return
	}
	render(w, r, http.StatusOK, views.Page("Choose a new password", views.ResetPage(u.Email, "")))
}

// reset sets the new password: the link is used up and every session of
// the account ends, in one transaction. The link is checked before the
// password is hashed, so a wrong link costs no hashing.
func (h *account) reset(w http.ResponseWriter, r *http.Request) {
	token := chi.URLParam(r, "token")
	if !parseForm(w, r) {
		return
	}
	u, err := h.store.PasswordResetUser(r.Context(), token)
	if errors.Is(err, db.ErrNotFound) {
		errorPage(w, r, http.StatusGone, msgResetGone)
		return
	}
	if err != nil {
		serverError(w, r, err)
		return
	}
	pw := r.PostForm.Get("password")
	if msg := validatePassword(pw); msg != "" {
		render(w, r, http.StatusUnprocessableEntity, views.Page("Choose a new password", views.ResetPage(u.Email, msg)))
		return
	}
	hash, err := h.hashes.hash(r.Context(), pw)
	if err != nil {
		hashError(w, r, err)
		return
	}
	user, ended, err := h.store.ResetPassword(r.Context(), token, hash)
	if errors.Is(err, db.ErrNotFound) { // used meanwhile
		errorPage(w, r, http.StatusGone, msgResetGone)
		return
	}
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.endStreams(ended)
	slog.InfoContext(r.Context(), "password reset", "user", user, "sessions_ended", len(ended))
	redirect(w, r, "/login?reset")
}
