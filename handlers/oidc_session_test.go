package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"weft/internal/testenv"
)

// A sign-in by single sign-on started in a browser ends when that browser
// signs in with a password: the flow does not survive the new session
// token, so whoever started it cannot later switch the browser to the
// provider account they finish it with.
func TestAPasswordSignInEndsASingleSignOnStartedBefore(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	c := testenv.NewClient(t, e.base)
	start := c.Get("/auth/oidc/login")
	if start.StatusCode != http.StatusSeeOther {
		t.Fatalf("start = %d", start.StatusCode)
	}
	c.Register("pat@example.com", password)
	e.user("sub-mallory", "mallory@example.com", true)
	req, _ := http.NewRequest(http.MethodGet, start.Header.Get("Location"), nil)
	back := c.Send(req)
	cb, err := url.Parse(back.Header.Get("Location"))
	if back.StatusCode != http.StatusFound || err != nil {
		t.Fatalf("the provider = %d %q", back.StatusCode, back.Header.Get("Location"))
	}
	if r := c.Get(cb.RequestURI()); r.StatusCode != http.StatusBadRequest || !strings.Contains(r.Body, "expired") {
		t.Errorf("the callback of a sign-in started before the password sign-in = %d %q: %.300s",
			r.StatusCode, r.Header.Get("Location"), r.Body)
	}
	if _, err := e.store.UserByEmail(context.Background(), "mallory@example.com"); err == nil {
		t.Error("the provider account was signed in to")
	}
	if r := c.Get("/settings"); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "pat@example.com") {
		t.Errorf("the browser is no longer pat's: %d", r.StatusCode)
	}
}

// Starting a sign-in makes an anonymous session; it lives as long as the
// sign-in may take, not the 30 days of a signed-in one, so a stream of
// /auth/oidc/login requests does not fill the sessions table for a month.
func TestAnAbandonedSingleSignOnSessionExpiresWithTheSignIn(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	expiry := func(c *testenv.Client) time.Duration {
		t.Helper()
		var at time.Time
		if err := e.store.Pool.QueryRow(context.Background(), "SELECT expiry FROM sessions WHERE token = $1",
			c.SessionCookie()).Scan(&at); err != nil {
			t.Fatalf("the session row: %v", err)
		}
		return time.Until(at)
	}
	c := testenv.NewClient(t, e.base)
	if r := c.Get("/auth/oidc/login"); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("start = %d", r.StatusCode)
	}
	if left := expiry(c); left > 11*time.Minute {
		t.Errorf("an anonymous sign-in's session lives %v", left)
	}
	// Finishing it gives the signed-in session its full lifetime.
	e.user("sub-l", "l@example.com", true)
	u := e.flow(c)
	if r := c.Get(u.RequestURI()); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("callback = %d: %.300s", r.StatusCode, r.Body)
	}
	if left := expiry(c); left < 29*24*time.Hour {
		t.Errorf("the signed-in session lives %v", left)
	}
}
