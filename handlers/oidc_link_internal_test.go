package handlers

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"
)

// The identity waiting for a password counts for ten minutes from the
// callback, whatever the session's own lifetime.
func TestAWaitingLinkExpiresAfterTenMinutes(t *testing.T) {
	s := &ssoPages{sessions: scs.New()}
	ctx, err := s.sessions.Load(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	put := func(started time.Time) {
		b, _ := json.Marshal(ssoLink{UserID: 1, Issuer: "https://id.example", Subject: "s", Email: "a@example.com", Started: started})
		s.sessions.Put(ctx, sessionSSOLink, string(b))
	}
	put(time.Now().Add(-9 * time.Minute))
	if l, ok := s.pendingLink(ctx); !ok || l.UserID != 1 {
		t.Errorf("a link of 9 minutes ago: %+v %v", l, ok)
	}
	put(time.Now().Add(-11 * time.Minute))
	if _, ok := s.pendingLink(ctx); ok {
		t.Error("a link of 11 minutes ago still counts")
	}
	if s.sessions.Exists(ctx, sessionSSOLink) {
		t.Error("an expired link stays in the session")
	}
}
