package handlers

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/alexedwards/scs/v2"

	"weft/db"
	"weft/views"
)

// Session keys.
const (
	sessionUserID      = "user_id"
	sessionWorkspaceID = "workspace_id"
)

// LoginLimit caps failed logins inside a sliding window, per client address
// and per account. The counts live in Postgres so every instance agrees.
type LoginLimit struct {
	PerIP      int
	PerAccount int
	Window     time.Duration
}

type authStore interface {
	CreateUser(ctx context.Context, email, displayName, passwordHash string) (db.User, db.Workspace, error)
	UserByEmail(ctx context.Context, email string) (db.User, error)
	UserByID(ctx context.Context, id int64) (db.User, error)
	CountUsers(ctx context.Context) (int, error)
	Setting(ctx context.Context, key, def string) (string, error)
	RecordLoginFailure(ctx context.Context, keys ...string) error
	LoginFailures(ctx context.Context, key string, since time.Time) (int, error)
	ClearLoginFailures(ctx context.Context, key string, before time.Time) error
}

// auth serves /register, /login and /logout and loads the signed-in user.
type auth struct {
	store    authStore
	sessions *scs.SessionManager
	limit    LoginLimit
}

const (
	msgBadLogin    = "Email or password is incorrect."
	msgRateLimited = "Too many failed sign-in attempts. Wait a few minutes and try again."
	minPassword    = 8
	maxPassword    = 1024
)

func (a *auth) showRegister(w http.ResponseWriter, r *http.Request) {
	if _, ok := currentUser(r); ok {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	a.renderRegister(w, r, http.StatusOK, "", "")
}

func (a *auth) renderRegister(w http.ResponseWriter, r *http.Request, status int, email, msg string) {
	n, err := a.store.CountUsers(r.Context())
	if err != nil {
		serverError(w, r, err)
		return
	}
	mode, err := a.store.Setting(r.Context(), "signup_mode", db.SignupOpen)
	if err != nil {
		serverError(w, r, err)
		return
	}
	f := views.AuthForm{Register: true, Email: email, Error: msg, FirstAccount: n == 0, SignupClosed: n > 0 && mode != db.SignupOpen}
	render(w, r, status, views.Page("Create account", views.AuthPage(f)))
}

func (a *auth) register(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	email := strings.TrimSpace(r.PostForm.Get("email"))
	pw := r.PostForm.Get("password")
	if msg := validateCredentials(email, pw); msg != "" {
		a.renderRegister(w, r, http.StatusUnprocessableEntity, email, msg)
		return
	}
	hash, err := hashPassword(pw)
	if err != nil {
		serverError(w, r, err)
		return
	}
	u, ws, err := a.store.CreateUser(r.Context(), email, displayNameFrom(email), hash)
	switch {
	case errors.Is(err, db.ErrConflict):
		a.renderRegister(w, r, http.StatusConflict, email, "An account with this email already exists. Sign in instead.")
		return
	case errors.Is(err, db.ErrSignupClosed):
		a.renderRegister(w, r, http.StatusForbidden, email, "Sign-up is closed on this server.")
		return
	case err != nil:
		serverError(w, r, err)
		return
	}
	if err := a.startSession(r.Context(), u.ID, ws.ID); err != nil {
		serverError(w, r, err)
		return
	}
	slog.InfoContext(r.Context(), "account created", "user", u.ID, "role", u.Role)
	redirect(w, r, "/")
}

func (a *auth) showLogin(w http.ResponseWriter, r *http.Request) {
	if _, ok := currentUser(r); ok {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	render(w, r, http.StatusOK, views.Page("Sign in", views.AuthPage(views.AuthForm{})))
}

func (a *auth) login(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	email := strings.TrimSpace(r.PostForm.Get("email"))
	pw := r.PostForm.Get("password")
	fail := func(status int, msg string) {
		render(w, r, status, views.Page("Sign in", views.AuthPage(views.AuthForm{Email: email, Error: msg})))
	}
	ipKey, accountKey := "ip:"+clientIP(r), "email:"+strings.ToLower(email)
	since := time.Now().Add(-a.limit.Window)
	for _, k := range []struct {
		key string
		max int
	}{{ipKey, a.limit.PerIP}, {accountKey, a.limit.PerAccount}} {
		n, err := a.store.LoginFailures(r.Context(), k.key, since)
		if err != nil {
			serverError(w, r, err)
			return
		}
		if n >= k.max {
			w.Header().Set("Retry-After", "300")
			fail(http.StatusTooManyRequests, msgRateLimited)
			return
		}
	}
	u, err := a.store.UserByEmail(r.Context(), email)
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		serverError(w, r, err)
		return
	}
	hash := u.PasswordHash
	if err != nil {
		hash = dummyHash // same work for an unknown account as for a known one
	}
	ok, herr := checkPassword(hash, pw)
	if herr != nil {
		serverError(w, r, herr)
		return
	}
	if err != nil || !ok || u.Disabled {
		if err := a.store.RecordLoginFailure(r.Context(), ipKey, accountKey); err != nil {
			serverError(w, r, err)
			return
		}
		fail(http.StatusUnauthorized, msgBadLogin)
		return
	}
	if err := a.store.ClearLoginFailures(r.Context(), accountKey, since); err != nil {
		serverError(w, r, err)
		return
	}
	if err := a.startSession(r.Context(), u.ID, 0); err != nil {
		serverError(w, r, err)
		return
	}
	redirect(w, r, "/")
}

// startSession renews the session token (no fixation across sign-in) and
// records who signed in.
func (a *auth) startSession(ctx context.Context, user, workspace int64) error {
	if err := a.sessions.RenewToken(ctx); err != nil {
		return err
	}
	a.sessions.Put(ctx, sessionUserID, user)
	if workspace != 0 {
		a.sessions.Put(ctx, sessionWorkspaceID, workspace)
	}
	return nil
}

func (a *auth) logout(w http.ResponseWriter, r *http.Request) {
	if err := a.sessions.Destroy(r.Context()); err != nil {
		serverError(w, r, err)
		return
	}
	redirect(w, r, "/login")
}

func validateCredentials(email, pw string) string {
	if addr, err := mail.ParseAddress(email); err != nil || addr.Address != email || len(email) > 254 {
		return "Enter a valid email address."
	}
	if n := utf8.RuneCountInString(pw); n < minPassword {
		return "Choose a password of at least 8 characters."
	} else if len(pw) > maxPassword {
		return "That password is too long."
	}
	return ""
}

func displayNameFrom(email string) string {
	name, _, _ := strings.Cut(email, "@")
	return name
}

// clientIP is the address of the TCP peer. Weft does not trust forwarding
// headers; behind a proxy every client shares the proxy's limit.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
