package handlers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"weft/db"
	"weft/internal/usererr"
	"weft/views"
)

type tokenStore interface {
	CreateAPIToken(ctx context.Context, user int64, in db.NewAPIToken) (db.APIToken, error)
	APITokens(ctx context.Context, user int64) ([]db.APIToken, error)
	RevokeAPIToken(ctx context.Context, user, id int64) error
}

// tokenPages serve the API tokens part of /settings (issue 19): create
// (the token shown once, in the answer to the form), list, revoke.
type tokenPages struct {
	store tokenStore
	now   func() time.Time
}

// tokenExpiries are the expiry choices of the create form.
var tokenExpiries = map[string]time.Duration{"7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour,
	"90d": 90 * 24 * time.Hour, "365d": 365 * 24 * time.Hour, "never": 0}

// section is the tokens part of /settings.
func (h *tokenPages) section(r *http.Request, created *views.CreatedToken, errMsg string) (views.TokenSettings, error) {
	u, _ := currentUser(r)
	list, err := h.store.APITokens(r.Context(), u.ID)
	d := views.TokenSettings{Tokens: list, Created: created, Error: errMsg, Now: h.now()}
	if r.Method == http.MethodGet && r.URL.Query().Has("token-revoked") {
		d.Notice = "The token was revoked: programs using it are refused from now on."
	}
	return d, err
}

// newAPIToken makes a token: the prefix and 32 random bytes (256 bits) in
// unpadded base64url; only its SHA-256 is stored.
func newAPIToken() (value string, sum []byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails (Go 1.24+)
	value = apiTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	s := sha256.Sum256([]byte(value))
	return value, s[:]
}

// create serves POST /settings/tokens: the page again, with the new token
// shown once (not cached; a reload shows it no more).
func (h *tokenPages) create(s *settings) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, _ := currentUser(r)
		if !parseForm(w, r) {
			return
		}
		in, msg := h.parseCreate(r)
		if msg != "" {
			s.renderTokens(w, r, http.StatusUnprocessableEntity, nil, msg)
			return
		}
		value, sum := newAPIToken()
		in.TokenSHA256, in.TokenHint = sum, value[len(apiTokenPrefix):len(apiTokenPrefix)+6]
		t, err := h.store.CreateAPIToken(r.Context(), u.ID, in)
		if msg, ok := usererr.Message(err); ok {
			s.renderTokens(w, r, http.StatusUnprocessableEntity, nil, usererr.Capitalize(msg)+".")
			return
		} else if err != nil {
			serverError(w, r, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		s.renderTokens(w, r, http.StatusOK, &views.CreatedToken{Token: t, Value: value}, "")
	}
}

// parseCreate reads the create form: a name, at least one scope, an expiry.
func (h *tokenPages) parseCreate(r *http.Request) (db.NewAPIToken, string) {
	name := strings.TrimSpace(r.PostForm.Get("name"))
	if name == "" || utf8.RuneCountInString(name) > 100 {
		return db.NewAPIToken{}, "Give the token a name of at most 100 characters."
	}
	var scopes []string
	for _, sc := range r.PostForm["scope"] {
		if sc != db.ScopeRead && sc != db.ScopeChat && sc != db.ScopeKB {
			return db.NewAPIToken{}, "Unknown scope " + sc + "."
		}
		if !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	if len(scopes) == 0 {
		return db.NewAPIToken{}, "Choose at least one scope."
	}
	if slices.Contains(scopes, db.ScopeKB) && !slices.Contains(scopes, db.ScopeChat) {
		// kb only widens answers, which need chat: alone it allows nothing.
		return db.NewAPIToken{}, "The kb scope adds knowledge bases to answers, which need the chat scope: choose chat too."
	}
	exp := r.PostForm.Get("expires")
	if exp == "" {
		exp = "30d"
	}
	d, ok := tokenExpiries[exp]
	if !ok {
		return db.NewAPIToken{}, "Choose when the token expires."
	}
	in := db.NewAPIToken{Name: name, Scopes: scopes}
	if d > 0 {
		at := h.now().Add(d)
		in.ExpiresAt = &at
	}
	return in, ""
}

// revoke serves POST /settings/tokens/{id}/revoke; another user's token is
// a 404.
func (h *tokenPages) revoke(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	tid, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	err := h.store.RevokeAPIToken(r.Context(), u.ID, tid)
	if errors.Is(err, db.ErrNotFound) {
		notFound(w, r)
		return
	} else if err != nil {
		serverError(w, r, err)
		return
	}
	redirect(w, r, "/settings?token-revoked#tokens")
}
