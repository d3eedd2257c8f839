package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"weft/db"
	"weft/views"
)

// Linking a provider's identity to an existing account by its email needs
// the account's password: Weft does not verify the emails of password
// sign-ups, so the account may have been made under this address by
// someone else (account pre-hijacking), who would otherwise keep its
// password and sessions and read what its owner then does. The callback
// keeps the verified identity in the session (sessionSSOLink, 10 minutes
// at most) and sends the browser here; the right password links it, ends
// every other session of the account and signs in. With WEFT_OIDC_ONLY
// too: this page checks a password only to link, it signs in nobody else.

const (
	sessionSSOLink = "oidc_link"

	msgLinkExpired = "This sign-in expired or was already used. Start again from the sign-in page."
	msgLinkWrong   = "That is not this account's password. Nothing was linked; try again."
	msgLinkGone    = "The account with this email no longer exists. Start again from the sign-in page."
)

// ssoLink is a verified identity waiting for the password of the account
// with its email.
type ssoLink struct {
	UserID                 int64
	Issuer, Subject, Email string
	Started                time.Time
}

// askPassword keeps the identity in the session for at most ssoFlowTTL and
// sends the browser to the page asking for the account's password.
func (s *ssoPages) askPassword(w http.ResponseWriter, r *http.Request, u db.User, id ssoIdentity) {
	ctx := r.Context()
	l := ssoLink{UserID: u.ID, Issuer: id.issuer, Subject: id.subject, Email: id.Email, Started: time.Now()}
	b, err := json.Marshal(l)
	if err != nil {
		serverError(w, r, err)
		return
	}
	s.sessions.Put(ctx, sessionSSOLink, string(b))
	s.sessions.SetDeadline(ctx, l.Started.Add(ssoFlowTTL))
	slog.InfoContext(ctx, "single sign-on waits for the password of the account with its email", "user", u.ID, "issuer", id.issuer)
	redirect(w, r, "/auth/oidc/link")
}

// pendingLink is the identity waiting in this browser's session, if it
// has not expired.
func (s *ssoPages) pendingLink(ctx context.Context) (ssoLink, bool) {
	var l ssoLink
	raw := s.sessions.GetString(ctx, sessionSSOLink)
	if raw == "" {
		return l, false
	}
	if json.Unmarshal([]byte(raw), &l) != nil || time.Since(l.Started) > ssoFlowTTL {
		s.sessions.Remove(ctx, sessionSSOLink)
		return l, false
	}
	return l, true
}

// showLink is GET /auth/oidc/link: the password form.
func (s *ssoPages) showLink(w http.ResponseWriter, r *http.Request) {
	l, ok := s.linkRequest(w, r)
	if ok {
		s.renderLink(w, r, http.StatusOK, l, "")
	}
}

// linkRequest answers what every request to /auth/oidc/link has in common
// (no single sign-on, signed in already, nothing waiting); false when it
// answered.
func (s *ssoPages) linkRequest(w http.ResponseWriter, r *http.Request) (ssoLink, bool) {
	if s.cfg == nil {
		errorPage(w, r, http.StatusNotFound, msgSSONotConfigured)
		return ssoLink{}, false
	}
	if _, ok := currentUser(r); ok {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return ssoLink{}, false
	}
	if r.Method == http.MethodPost {
		if !parseForm(w, r) {
			return ssoLink{}, false
		}
		if r.PostForm.Has("cancel") {
			s.sessions.Remove(r.Context(), sessionSSOLink)
			redirect(w, r, "/login")
			return ssoLink{}, false
		}
	}
	l, ok := s.pendingLink(r.Context())
	if !ok {
		errorPage(w, r, http.StatusBadRequest, msgLinkExpired)
	}
	return l, ok
}

func (s *ssoPages) renderLink(w http.ResponseWriter, r *http.Request, status int, l ssoLink, msg string) {
	render(w, r, status, views.Page("Link your account", views.SSOLinkPage(views.SSOLink{
		Provider: s.name(), Email: l.Email, PasswordsOff: s.cfg.Only, Error: msg})))
}

// link is POST /auth/oidc/link: with the account's password, the identity
// is linked, the account's sessions end and this browser signs in.
func (s *ssoPages) link(w http.ResponseWriter, r *http.Request) {
	l, ok := s.linkRequest(w, r)
	if !ok {
		return
	}
	u, ok := s.proveLink(w, r, l)
	if !ok {
		return
	}
	ctx := r.Context()
	ended, err := s.store.LinkIdentity(ctx, u.ID, db.Identity{Issuer: l.Issuer, Subject: l.Subject, Email: l.Email})
	switch {
	case errors.Is(err, db.ErrOtherIdentity):
		s.refuseLink(w, r, http.StatusConflict, fmt.Sprintf("The account with this email is linked to another %s account.", s.name()))
		return
	case errors.Is(err, db.ErrConflict): // the same link, finished twice at once
		s.refuseLink(w, r, http.StatusConflict, msgLinkExpired)
		return
	case err != nil:
		serverError(w, r, err)
		return
	}
	for _, token := range ended {
		s.auth.streams.endSession(token)
	}
	slog.InfoContext(ctx, "single sign-on linked to an existing account by its password", "user", u.ID, "issuer", l.Issuer,
		"sessions_ended", len(ended))
	// The password was checked against u.PasswordHash: a reset or change
	// since then refuses the session, as for a password sign-in.
	if err := s.auth.startSession(ctx, u.ID, 0, u.PasswordHash); errors.Is(err, db.ErrPasswordChanged) {
		errorPage(w, r, http.StatusUnauthorized, "The account's password was changed meanwhile. Sign in again.")
		return
	} else if err != nil {
		serverError(w, r, err)
		return
	}
	redirect(w, r, "/")
}

// proveLink checks the password of the account waiting to be linked,
// counted like a sign-in against the address's and the account's limits;
// false when it answered the request itself.
func (s *ssoPages) proveLink(w http.ResponseWriter, r *http.Request, l ssoLink) (db.User, bool) {
	ctx := r.Context()
	u, err := s.auth.store.UserByID(ctx, l.UserID)
	if errors.Is(err, db.ErrNotFound) {
		s.refuseLink(w, r, http.StatusConflict, msgLinkGone)
		return u, false
	}
	if err != nil {
		serverError(w, r, err)
		return u, false
	}
	// The account as it is now: disabled, given a provider account or
	// deleted and made again since the callback.
	status, msg, err := s.linkable(ctx, u, ssoIdentity{issuer: l.Issuer, subject: l.Subject, Email: l.Email})
	if err != nil {
		serverError(w, r, err)
		return u, false
	}
	if msg != "" {
		s.refuseLink(w, r, status, msg)
		return u, false
	}
	accountKey := "email:" + strings.ToLower(u.Email)
	since := time.Now().Add(-s.auth.limit.Window)
	reserved, err := s.auth.store.ReserveLoginAttempt(ctx, since,
		db.RateKey{Key: "ip:" + clientIP(r), Max: s.auth.limit.PerIP}, db.RateKey{Key: accountKey, Max: s.auth.limit.PerAccount})
	if errors.Is(err, db.ErrRateLimited) {
		w.Header().Set("Retry-After", "300")
		s.renderLink(w, r, http.StatusTooManyRequests, l, msgRateLimited)
		return u, false
	}
	if err != nil {
		serverError(w, r, err)
		return u, false
	}
	ok, err := s.auth.hashes.check(ctx, u.PasswordHash, r.PostForm.Get("password"))
	if errors.Is(err, errHashBusy) || errors.Is(err, context.Canceled) {
		// The password was not checked: the attempt does not count.
		_ = s.auth.store.ReleaseLoginAttempt(context.WithoutCancel(ctx), reserved)
	}
	if err != nil {
		hashError(w, r, err)
		return u, false
	}
	if !ok {
		slog.InfoContext(ctx, "single sign-on link refused: wrong password", "user", u.ID, "issuer", l.Issuer)
		s.renderLink(w, r, http.StatusUnauthorized, l, msgLinkWrong)
		return u, false
	}
	if err := s.auth.store.ReleaseLoginAttempt(ctx, reserved); err != nil {
		serverError(w, r, err)
		return u, false
	}
	if err := s.auth.store.ClearLoginFailures(ctx, accountKey, since); err != nil {
		serverError(w, r, err)
		return u, false
	}
	return u, true
}

// refuseLink ends the waiting link and says why.
func (s *ssoPages) refuseLink(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.sessions.Remove(r.Context(), sessionSSOLink)
	slog.InfoContext(r.Context(), "single sign-on link refused", "status", status)
	errorPage(w, r, status, msg)
}
