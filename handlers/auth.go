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
	CreateUserWithToken(ctx context.Context, email, displayName, passwordHash, setupToken string) (db.User, db.Workspace, error)
	CreateAccount(ctx context.Context, a db.NewAccount) (db.User, db.Workspace, error)
	CheckInvite(ctx context.Context, token, email string) (db.Invite, error)
	RecordSession(ctx context.Context, token, previous string, user int64, userAgent, checked string) error
	TouchSession(ctx context.Context, token string, user int64) error
	SessionUser(ctx context.Context, user int64, token string) (db.User, bool, error)
	ForgetSession(ctx context.Context, token string) error
	CountUsers(ctx context.Context) (int, error)
	Setting(ctx context.Context, key, def string) (string, error)
	SetupToken(ctx context.Context, token string) (needed, valid bool, err error)
	ReserveSignup(ctx context.Context, client string, max int, since time.Time) error
	ReserveLoginAttempt(ctx context.Context, since time.Time, keys ...db.RateKey) ([]int64, error)
	ReleaseLoginAttempt(ctx context.Context, ids []int64) error
	ClearLoginFailures(ctx context.Context, key string, before time.Time) error
}

// auth serves /register, /login and /logout and loads the signed-in user.
type auth struct {
	store       authStore
	sessions    *scs.SessionManager
	limit       LoginLimit
	signupLimit int // sign-ups per client address per hour; 0 = no limit
	hashes      *hashPool
	streams     *streamRegistry // ended at logout
	seen        *seenSessions   // when each session last wrote its last-seen time
}

const (
	msgBadLogin      = "Email or password is incorrect."
	msgRateLimited   = "Too many failed sign-in attempts. Wait a few minutes and try again."
	msgSignupLimited = "Too many accounts were created from your address. Try again in an hour."
	msgSignupClosed  = "Sign-up is closed on this server."
	msgSetupToken    = "Enter the setup token printed in the server's log at start-up."
	msgInviteOnly    = "Sign-up on this server is by invitation only. Ask its administrator for an invite link."
	minPassword      = 8
	maxPassword      = 1024
)

func (a *auth) showRegister(w http.ResponseWriter, r *http.Request) {
	if _, ok := currentUser(r); ok {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	a.renderRegister(w, r, http.StatusOK, "", "", "")
}

func (a *auth) renderRegister(w http.ResponseWriter, r *http.Request, status int, email, invite, msg string) {
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
	needsToken, _, err := a.store.SetupToken(r.Context(), "")
	if err != nil {
		serverError(w, r, err)
		return
	}
	f := views.AuthForm{Register: true, Email: email, Error: msg, FirstAccount: n == 0,
		SignupClosed: n > 0 && mode == db.SignupClosed, NeedsSetupToken: needsToken,
		InviteOnly: n > 0 && mode == db.SignupInvite, Invite: invite}
	render(w, r, status, views.Page("Create account", views.AuthPage(f)))
}

// register creates an account. Everything cheap is decided before the
// password is hashed: the form, whether sign-up is open, the first
// account's setup token, the per-address sign-up limit. Hashing then waits
// for a slot of the bounded pool.
func (a *auth) register(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	email := strings.TrimSpace(r.PostForm.Get("email"))
	pw := r.PostForm.Get("password")
	token := strings.TrimSpace(r.PostForm.Get("setup_token"))
	invite := strings.TrimSpace(r.PostForm.Get("invite"))
	if msg := validateCredentials(email, pw); msg != "" {
		a.renderRegister(w, r, http.StatusUnprocessableEntity, email, invite, msg)
		return
	}
	if status, msg, err := a.mayRegister(r, token, invite, email); err != nil {
		serverError(w, r, err)
		return
	} else if msg != "" {
		a.renderRegister(w, r, status, email, invite, msg)
		return
	}
	hash, err := a.hashes.hash(r.Context(), pw)
	if err != nil {
		hashError(w, r, err)
		return
	}
	u, ws, err := a.store.CreateAccount(r.Context(), db.NewAccount{Email: email, DisplayName: displayNameFrom(email),
		PasswordHash: hash, SetupToken: token, Invite: invite})
	switch {
	case errors.Is(err, db.ErrConflict):
		a.renderRegister(w, r, http.StatusConflict, email, invite, "An account with this email already exists. Sign in instead.")
		return
	case errors.Is(err, db.ErrSignupClosed):
		a.renderRegister(w, r, http.StatusForbidden, email, invite, msgSignupClosed)
		return
	case errors.Is(err, db.ErrSetupToken):
		a.renderRegister(w, r, http.StatusForbidden, email, invite, msgSetupToken)
		return
	case inviteMessage(err) != "":
		a.renderRegister(w, r, inviteStatus(err), email, invite, inviteMessage(err))
		return
	case err != nil:
		serverError(w, r, err)
		return
	}
	if err := a.startSession(r.Context(), u.ID, ws.ID, ""); err != nil {
		serverError(w, r, err)
		return
	}
	slog.InfoContext(r.Context(), "account created", "user", u.ID, "role", u.Role)
	redirect(w, r, "/")
}

// mayRegister applies the checks that come before hashing; a non-empty
// message refuses with that status. CreateUserWithToken decides again under
// its lock; these checks only keep refused sign-ups cheap.
func (a *auth) mayRegister(r *http.Request, token, invite, email string) (int, string, error) {
	ctx := r.Context()
	n, err := a.store.CountUsers(ctx)
	if err != nil {
		return 0, "", err
	}
	if n > 0 {
		mode, err := a.store.Setting(ctx, "signup_mode", db.SignupOpen)
		if err != nil {
			return 0, "", err
		}
		switch mode {
		case db.SignupOpen:
		case db.SignupInvite:
			if invite == "" {
				return http.StatusForbidden, msgInviteOnly, nil
			}
			if _, err := a.store.CheckInvite(ctx, invite, email); inviteMessage(err) != "" {
				return inviteStatus(err), inviteMessage(err), nil
			} else if err != nil {
				return 0, "", err
			}
		default:
			return http.StatusForbidden, msgSignupClosed, nil
		}
	} else if needed, valid, err := a.store.SetupToken(ctx, token); err != nil {
		return 0, "", err
	} else if needed && !valid {
		return http.StatusForbidden, msgSetupToken, nil
	}
	if a.signupLimit > 0 {
		err := a.store.ReserveSignup(ctx, clientIP(r), a.signupLimit, time.Now().Add(-time.Hour))
		if errors.Is(err, db.ErrRateLimited) {
			return http.StatusTooManyRequests, msgSignupLimited, nil
		}
		if err != nil {
			return 0, "", err
		}
	}
	return 0, "", nil
}

// hashError answers a failed hash: busy is a 503 the user can retry.
func hashError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errHashBusy) {
		w.Header().Set("Retry-After", "5")
		errorPage(w, r, http.StatusServiceUnavailable, msgHashBusy)
		return
	}
	serverError(w, r, err)
}

func (a *auth) showLogin(w http.ResponseWriter, r *http.Request) {
	if _, ok := currentUser(r); ok {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	f := views.AuthForm{}
	if r.URL.Query().Has("reset") {
		f.Notice = "Your password was changed and every session of your account was signed out. Sign in with the new password."
	}
	render(w, r, http.StatusOK, views.Page("Sign in", views.AuthPage(f)))
}

// login checks a password. The attempt is counted as a failure before the
// password is checked (atomically, per address and per account), so that
// parallel guesses cannot pass the limit; a right password takes it back.
func (a *auth) login(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	email := strings.TrimSpace(r.PostForm.Get("email"))
	pw := r.PostForm.Get("password")
	fail := func(status int, msg string) {
		render(w, r, status, views.Page("Sign in", views.AuthPage(views.AuthForm{Email: email, Error: msg})))
	}
	accountKey := "email:" + strings.ToLower(email)
	since := time.Now().Add(-a.limit.Window)
	reserved, err := a.store.ReserveLoginAttempt(r.Context(), since,
		db.RateKey{Key: "ip:" + clientIP(r), Max: a.limit.PerIP}, db.RateKey{Key: accountKey, Max: a.limit.PerAccount})
	if errors.Is(err, db.ErrRateLimited) {
		w.Header().Set("Retry-After", "300")
		fail(http.StatusTooManyRequests, msgRateLimited)
		return
	}
	if err != nil {
		serverError(w, r, err)
		return
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
	ok, herr := a.hashes.check(r.Context(), hash, pw)
	if errors.Is(herr, errHashBusy) || errors.Is(herr, context.Canceled) {
		// The password was not checked: the attempt does not count.
		_ = a.store.ReleaseLoginAttempt(context.WithoutCancel(r.Context()), reserved)
	}
	if herr != nil {
		hashError(w, r, herr)
		return
	}
	if err != nil || !ok || u.Disabled {
		fail(http.StatusUnauthorized, msgBadLogin)
		return
	}
	if err := a.store.ReleaseLoginAttempt(r.Context(), reserved); err != nil {
		serverError(w, r, err)
		return
	}
	if err := a.store.ClearLoginFailures(r.Context(), accountKey, since); err != nil {
		serverError(w, r, err)
		return
	}
	err = a.startSession(r.Context(), u.ID, 0, u.PasswordHash)
	if errors.Is(err, db.ErrPasswordChanged) {
		// Reset or changed since it was checked: that password is no
		// longer the account's.
		fail(http.StatusUnauthorized, msgBadLogin)
		return
	}
	if err != nil {
		serverError(w, r, err)
		return
	}
	redirect(w, r, "/")
}

// startSession renews the session token (no fixation across sign-in) and
// records who signed in, also in user_sessions, so that the account's
// sessions can be listed and ended (db.EndUserSessions). checked is the
// password hash a password sign-in was checked against ("" for others):
// a reset or change since then refuses the session (db.ErrPasswordChanged).
// A single sign-on started before ends, and so does a link waiting for a
// password: neither may switch the signed-in browser to another account
// later.
func (a *auth) startSession(ctx context.Context, user, workspace int64, checked string) error {
	previous := a.sessions.Token(ctx)
	if err := a.sessions.RenewToken(ctx); err != nil {
		return err
	}
	a.sessions.Remove(ctx, sessionSSOFlow)
	a.sessions.Remove(ctx, sessionSSOLink)
	token := a.sessions.Token(ctx)
	if err := a.store.RecordSession(ctx, token, previous, user, userAgent(ctx), checked); err != nil {
		return err
	}
	a.sessions.Put(ctx, sessionUserID, user)
	if workspace != 0 {
		a.sessions.Put(ctx, sessionWorkspaceID, workspace)
	}
	a.seen.mark(token)
	return nil
}

func (a *auth) logout(w http.ResponseWriter, r *http.Request) {
	// The session's event streams end with it (on this instance now, on
	// others at their next session sweep).
	token := a.sessions.Token(r.Context())
	a.streams.endSession(token)
	if err := a.store.ForgetSession(r.Context(), token); err != nil {
		// Bookkeeping only: the session itself is destroyed below, and a
		// mapping without its session is ignored and pruned.
		slog.WarnContext(r.Context(), "forget a session's mapping", "err", err)
	}
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
	return validatePassword(pw)
}

// validatePassword is the rule every new password follows.
func validatePassword(pw string) string {
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
