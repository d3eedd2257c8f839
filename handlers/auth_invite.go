package handlers

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"weft/db"
	"weft/views"
)

// showInvite is an invite link: the sign-up form carrying the invite (its
// address filled in when the invite is for one), or why it cannot be used.
// Opening it changes nothing; the sign-up uses it up.
func (a *auth) showInvite(w http.ResponseWriter, r *http.Request) {
	if _, ok := currentUser(r); ok {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	token := chi.URLParam(r, "token")
	inv, err := a.store.CheckInvite(r.Context(), token, "")
	if msg := inviteMessage(err); msg != "" {
		render(w, r, inviteStatus(err), views.Page("Create account", views.AuthPage(views.AuthForm{Register: true,
			Error: msg, InviteOnly: true})))
		return
	}
	if err != nil {
		serverError(w, r, err)
		return
	}
	a.renderRegister(w, r, http.StatusOK, inv.Email, token, "")
}

// inviteMessage says why an invite was refused ("" for any other error).
func inviteMessage(err error) string {
	switch {
	case errors.Is(err, db.ErrInviteNeeded):
		return msgInviteOnly
	case errors.Is(err, db.ErrInviteUnknown):
		return "This invite link is not valid: it may have been revoked. Ask the administrator for a new one."
	case errors.Is(err, db.ErrInviteUsed):
		return "This invite link was already used. Ask the administrator for a new one."
	case errors.Is(err, db.ErrInviteExpired):
		return "This invite link has expired. Ask the administrator for a new one."
	case errors.Is(err, db.ErrInviteEmail):
		return "This invite link is for another email address."
	}
	return ""
}

func inviteStatus(err error) int {
	switch {
	case errors.Is(err, db.ErrInviteUnknown):
		return http.StatusNotFound
	case errors.Is(err, db.ErrInviteUsed), errors.Is(err, db.ErrInviteExpired):
		return http.StatusGone
	}
	return http.StatusForbidden
}

// seenEvery is how often one session writes its last-seen time: the list
// of users says when each was last seen, a few minutes off, without a
// write per request.
const seenEvery = 5 * time.Minute

// seenSessions remembers when each session of this instance last wrote
// its last-seen time.
type seenSessions struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func newSeenSessions() *seenSessions { return &seenSessions{last: map[string]time.Time{}} }

// due reports whether token should write its last-seen time now, and if
// so counts it as written.
func (s *seenSessions) due(token string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.last[token]; ok && now.Sub(t) < seenEvery {
		return false
	}
	if len(s.last) >= 100_000 { // bounded: forget what is old anyway
		for k, t := range s.last {
			if now.Sub(t) >= seenEvery {
				delete(s.last, k)
			}
		}
	}
	s.last[token] = now
	return true
}

func (s *seenSessions) mark(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last[token] = time.Now()
}

// touch writes the session's last-seen time when it is due (errors are
// only logged: it is bookkeeping).
func (a *auth) touch(r *http.Request, user int64) {
	token := a.sessions.Token(r.Context())
	if token == "" || !a.seen.due(token, time.Now()) {
		return
	}
	if err := a.store.TouchSession(r.Context(), token, user); err != nil && r.Context().Err() == nil {
		slog.WarnContext(r.Context(), "session last seen", "err", err)
	}
}

type userAgentKey struct{}

// userAgent is the request's User-Agent (put in the context by withUser,
// for startSession).
func userAgent(ctx context.Context) string {
	s, _ := ctx.Value(userAgentKey{}).(string)
	return strings.ToValidUTF8(s, "")
}
