package handlers

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"weft/db"
	"weft/views"
)

// ssoStore is what single sign-on needs of the database beyond auth's.
type ssoStore interface {
	TouchIdentity(ctx context.Context, issuer, subject, email string) (db.User, error)
	Identities(ctx context.Context, user int64) ([]db.Identity, error)
	LinkIdentity(ctx context.Context, user int64, id db.Identity) ([]string, error)
	CreateUserWithIdentity(ctx context.Context, n db.NewIdentityUser) (db.User, db.Workspace, error)
}

// ssoPages serves single sign-on with an OpenID Connect provider:
// /auth/oidc/login starts the authorization-code flow with PKCE, a state
// and a nonce kept in the (anonymous) session; /auth/oidc/callback checks
// them, exchanges the code, verifies the ID token and signs the account
// in (oidc_accounts.go decides which account), or sends the browser to
// /auth/oidc/link, which asks for the password of the existing account
// with the identity's email before linking them (oidc_link.go). Without
// configuration every route answers 404.
type ssoPages struct {
	cfg      *OIDCConfig // nil: single sign-on is off
	provider *ssoProvider
	store    ssoStore
	auth     *auth // sessions, limits, password hashing, the auth store
	sessions *scs.SessionManager
}

const (
	sessionSSOFlow = "oidc_flow"
	ssoFlowTTL     = 10 * time.Minute
	maxInviteToken = 100 // longer is no invite of ours, and not kept in the session

	msgSSONotConfigured = "Single sign-on is not configured on this server."
	msgSSOExpired       = "This sign-in expired or was started in another browser. Start again from the sign-in page."
	msgSSOState         = "This sign-in could not be verified: it does not match the one this browser started. Start again from the sign-in page."
	msgSSODisabled      = "This account is disabled. Ask the server's administrator."
)

func newSSOPages(cfg Config, store ssoStore, a *auth) *ssoPages {
	s := &ssoPages{store: store, auth: a, sessions: a.sessions}
	if cfg.OIDC != nil {
		c := *cfg.OIDC
		s.cfg, s.provider = &c, newSSOProvider(c)
	}
	return s
}

// ssoFlow is one sign-in in progress, kept in the session until the
// provider sends the browser back (one at a time per browser).
type ssoFlow struct {
	State, Nonce, Verifier string
	SetupToken             string // the first administrator's, typed on the sign-in page
	Invite                 string // the invite link's token, when the sign-in started from one
	Started                time.Time
}

func (s *ssoPages) name() string { return s.cfg.Name }

// login starts a sign-in: a fresh state, nonce and PKCE verifier in the
// session, then the provider's authorization page. POST carries the first
// administrator's setup token from the sign-in page's form.
func (s *ssoPages) login(w http.ResponseWriter, r *http.Request) {
	if s.cfg == nil {
		errorPage(w, r, http.StatusNotFound, msgSSONotConfigured)
		return
	}
	if _, ok := currentUser(r); ok {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	var token string
	if r.Method == http.MethodPost {
		if !parseForm(w, r) {
			return
		}
		token = strings.TrimSpace(r.PostForm.Get("setup_token"))
		if needed, valid, err := s.auth.store.SetupToken(r.Context(), token); err != nil {
			serverError(w, r, err)
			return
		} else if needed && !valid {
			render(w, r, http.StatusForbidden, views.Page("Sign in", views.AuthPage(views.AuthForm{Error: msgSetupToken})))
			return
		}
	}
	ready, err := s.provider.get(r.Context())
	if err != nil {
		s.unreachable(w, r, err)
		return
	}
	// From an invite link's page, the button carries its invite.
	invite := r.URL.Query().Get("invite")
	if len(invite) > maxInviteToken {
		invite = ""
	}
	f := ssoFlow{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier(), SetupToken: token,
		Invite: invite, Started: time.Now()}
	b, err := json.Marshal(f)
	if err != nil {
		serverError(w, r, err)
		return
	}
	s.sessions.Put(r.Context(), sessionSSOFlow, string(b))
	s.sessions.Remove(r.Context(), sessionSSOLink) // a new sign-in replaces a link waiting for its password
	// This anonymous session lives as long as the sign-in may take (signing
	// in renews it for the full lifetime): abandoned ones do not pile up.
	s.sessions.SetDeadline(r.Context(), f.Started.Add(ssoFlowTTL))
	http.Redirect(w, r, ready.oauth.AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier)),
		http.StatusSeeOther)
}

func (s *ssoPages) unreachable(w http.ResponseWriter, r *http.Request, err error) {
	slog.WarnContext(r.Context(), "single sign-on unavailable", "err", err)
	w.Header().Set("Retry-After", "30")
	msg := "Single sign-on is not reachable right now. Try again in a moment, or sign in with your password."
	if s.cfg.Only {
		msg = "Single sign-on is not reachable right now. Try again in a moment."
	}
	errorPage(w, r, http.StatusServiceUnavailable, msg)
}

// takeFlow removes the sign-in in progress from the session and returns
// it: each is used once, whatever the outcome.
func (s *ssoPages) takeFlow(ctx context.Context) (ssoFlow, bool) {
	var f ssoFlow
	raw := s.sessions.PopString(ctx, sessionSSOFlow)
	if raw == "" || json.Unmarshal([]byte(raw), &f) != nil || time.Since(f.Started) > ssoFlowTTL {
		return f, false
	}
	return f, true
}

// callback finishes a sign-in. The state must be the one this browser's
// session started (so a link from another site cannot sign anyone in);
// the code is exchanged with the PKCE verifier; the ID token's signature,
// issuer, audience and expiry are checked by go-oidc, its nonce here.
// Every refusal counts against the address's sign-in limit.
func (s *ssoPages) callback(w http.ResponseWriter, r *http.Request) {
	if s.cfg == nil {
		errorPage(w, r, http.StatusNotFound, msgSSONotConfigured)
		return
	}
	ctx := r.Context()
	reserved, err := s.auth.store.ReserveLoginAttempt(ctx, time.Now().Add(-s.auth.limit.Window),
		db.RateKey{Key: "ip:" + clientIP(r), Max: s.auth.limit.PerIP})
	if errors.Is(err, db.ErrRateLimited) {
		w.Header().Set("Retry-After", "300")
		errorPage(w, r, http.StatusTooManyRequests, msgRateLimited)
		return
	}
	if err != nil {
		serverError(w, r, err)
		return
	}
	f, ok := s.takeFlow(ctx)
	q := r.URL.Query()
	switch {
	case !ok:
		errorPage(w, r, http.StatusBadRequest, msgSSOExpired)
		return
	case subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1:
		errorPage(w, r, http.StatusBadRequest, msgSSOState)
		return
	case q.Get("error") != "":
		// The provider's own words are not shown: they are its text, not ours.
		slog.InfoContext(ctx, "single sign-on refused by the provider", "error", q.Get("error"))
		errorPage(w, r, http.StatusUnauthorized, fmt.Sprintf("%s did not sign you in. Start again from the sign-in page.", upperFirst(s.name())))
		return
	case q.Get("code") == "":
		errorPage(w, r, http.StatusBadRequest, msgSSOExpired)
		return
	}
	claims, status, err := s.verify(ctx, q.Get("code"), f)
	if err != nil {
		slog.WarnContext(ctx, "single sign-on failed", "err", err)
		msg := fmt.Sprintf("The sign-in with %s could not be completed. Start again from the sign-in page.", s.name())
		if errors.Is(err, errSSOUnreachable) {
			s.unreachable(w, r, err)
			return
		}
		errorPage(w, r, status, msg)
		return
	}
	out, err := s.account(r, claims, f)
	if err != nil {
		hashError(w, r, err)
		return
	}
	if out.msg != "" {
		slog.InfoContext(ctx, "single sign-on refused", "issuer", claims.issuer, "subject", claims.subject, "status", out.status)
		errorPage(w, r, out.status, out.msg)
		return
	}
	if err := s.auth.store.ReleaseLoginAttempt(ctx, reserved); err != nil {
		serverError(w, r, err)
		return
	}
	if out.link {
		s.askPassword(w, r, out.user, claims)
		return
	}
	if err := s.auth.startSession(ctx, out.user.ID, out.workspace, ""); err != nil {
		serverError(w, r, err)
		return
	}
	redirect(w, r, "/")
}

// ssoIdentity is what a verified ID token says about the person.
type ssoIdentity struct {
	issuer, subject string
	emailVerified   bool      // what EmailVerified says, or WEFT_OIDC_TRUST_EMAIL when it says nothing
	Email           string    `json:"email"`
	EmailVerified   *flexBool `json:"email_verified"` // nil: no claim
	Name            string    `json:"name"`
	Username        string    `json:"preferred_username"`
	AuthorizedParty string    `json:"azp"`
}

// verify exchanges the code (with the PKCE verifier) and verifies the ID
// token it brings; the status is the one to answer with when it fails.
func (s *ssoPages) verify(ctx context.Context, code string, f ssoFlow) (ssoIdentity, int, error) {
	var id ssoIdentity
	ready, err := s.provider.get(ctx)
	if err != nil {
		return id, http.StatusServiceUnavailable, err
	}
	pctx, cancel := context.WithTimeout(s.provider.ctx(ctx), s.cfg.Timeout)
	defer cancel()
	tok, err := ready.oauth.Exchange(pctx, code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return id, http.StatusBadGateway, fmt.Errorf("code exchange: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return id, http.StatusBadGateway, errors.New("the token response has no id_token")
	}
	idt, err := ready.verifier.Verify(pctx, raw)
	if err != nil {
		return id, http.StatusUnauthorized, fmt.Errorf("id token: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		return id, http.StatusUnauthorized, errors.New("id token: the nonce is not the one this sign-in sent")
	}
	if err := idt.Claims(&id); err != nil {
		return id, http.StatusBadGateway, fmt.Errorf("id token claims: %w", err)
	}
	// An azp names the party the token was issued to: it must be us, even
	// when our client id is among several audiences (OIDC Core 3.1.3.7).
	if id.AuthorizedParty != "" && id.AuthorizedParty != s.cfg.ClientID {
		return id, http.StatusUnauthorized, fmt.Errorf("id token: issued to %q (azp), not to this client", id.AuthorizedParty)
	}
	id.issuer, id.subject = idt.Issuer, idt.Subject
	// WEFT_OIDC_TRUST_EMAIL stands in for a claim the provider does not
	// send; a provider that says "not verified" is believed.
	if id.EmailVerified != nil {
		id.emailVerified = bool(*id.EmailVerified)
	} else {
		id.emailVerified = s.cfg.TrustEmail
	}
	id.Email = strings.TrimSpace(id.Email)
	return id, 0, nil
}

// flexBool reads a JSON boolean, or the strings "true" and "false" some
// providers send; anything else is false (an email is verified only when
// the provider says so plainly).
type flexBool bool

func (b *flexBool) UnmarshalJSON(data []byte) error {
	s := strings.Trim(string(data), `"`)
	*b = flexBool(s == "true")
	return nil
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// describe tells the sign-in and sign-up pages about single sign-on (its
// button, whether passwords are off, whether the provider is reachable).
func (s *ssoPages) describe(next http.HandlerFunc) http.HandlerFunc {
	if s.cfg == nil {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		needed, _, err := s.auth.store.SetupToken(r.Context(), "")
		if err != nil {
			serverError(w, r, err)
			return
		}
		sso := views.SSO{Name: s.name(), Only: s.cfg.Only, Unreachable: s.provider.unreachable(), NeedsSetupToken: needed}
		w.Header().Set("Content-Security-Policy",
			strings.Replace(contentSecurityPolicy, "form-action 'self'", s.provider.formAction(), 1))
		next(w, r.WithContext(views.WithSSO(r.Context(), sso)))
	}
}

// passwordsOff refuses password sign-in and sign-up when single sign-on
// is the only way in (WEFT_OIDC_ONLY), showing the page with its button.
func (s *ssoPages) passwordsOff(register bool, next http.HandlerFunc) http.HandlerFunc {
	if s.cfg == nil || !s.cfg.Only {
		return next
	}
	title, msg := "Sign in", fmt.Sprintf("Password sign-in is off on this server: sign in with %s.", s.name())
	if register {
		title, msg = "Create account", fmt.Sprintf("Accounts are made by signing in with %s on this server.", s.name())
	}
	return s.describe(func(w http.ResponseWriter, r *http.Request) {
		render(w, r, http.StatusForbidden, views.Page(title, views.AuthPage(views.AuthForm{Register: register, Error: msg})))
	})
}
