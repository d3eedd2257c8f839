package handlers_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"weft/internal/testenv"
)

// lockedLog collects what the default logger writes, from any goroutine.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Not parallel: it replaces the default logger to read what was logged.
// A password-reset or invite link's token is all it takes to set the
// account's password or make an account: whatever is asked with one —
// opened, used, used up — the request log never holds the token.
func TestResetAndInviteTokensNeverReachTheLogs(t *testing.T) {
	var logs lockedLog
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	app, store, admin, _, m := adminAndMember(t, testenv.Options{})
	if err := store.SetSetting(t.Context(), "signup_mode", "invite"); err != nil {
		t.Fatal(err)
	}
	link := resetURL.FindStringSubmatch(admin.Post(userPath(m.ID, "reset-link"), nil).Body)
	if link == nil {
		t.Fatal("no reset link")
	}
	invite, inviteToken := makeInvite(t, admin, url.Values{})
	anon := testenv.NewClient(t, app.TS.URL)
	anon.Get(link[1])
	if r := anon.Post(link[1], url.Values{"password": {"a brand new passphrase"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("reset = %d", r.StatusCode)
	}
	anon.Get(link[1]) // used up
	anon.Get(invite)
	anon.Post("/register", url.Values{"email": {"new@example.com"}, "password": {password}, "invite": {inviteToken}})

	got := logs.String()
	resetToken := strings.TrimPrefix(link[1], "/reset/")
	for name, tok := range map[string]string{"reset": resetToken, "invite": inviteToken} {
		if strings.Contains(got, tok[:12]) {
			t.Errorf("the log holds the %s link's token:\n%s", name, got)
		}
	}
	if !strings.Contains(got, "path=/reset/…") || !strings.Contains(got, "path=/invite/…") {
		t.Errorf("the log does not say a reset or an invite link was asked for:\n%s", got)
	}
}

// Whatever the address bar says, the list of users answers with a page or
// a plain refusal, never a server error: a page number past any integer, a
// search that is not text, a search of a whole paragraph.
func TestTheUsersListAnswersAnyPageOrSearchWithoutAServerError(t *testing.T) {
	t.Parallel()
	_, _, admin, _, _ := adminAndMember(t, testenv.Options{})
	for _, q := range []string{
		"page=200000000000000000",
		"page=9223372036854775807",
		"q=%FF%FE",
		"q=" + strings.Repeat("a", 5000),
	} {
		r := admin.Get("/admin/users?" + q)
		if r.StatusCode >= 500 {
			t.Errorf("/admin/users?%.40s = %d", q, r.StatusCode)
		}
	}
	if r := admin.Get("/admin/users?page=200000000000000000"); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "users-prev") {
		t.Errorf("a page past the end = %d, want the list with a way back", r.StatusCode)
	}
	if r := admin.Get("/admin/users?q=%25"); r.StatusCode != http.StatusOK || strings.Contains(r.Body, "member@example.com") {
		t.Errorf("a search for %% = %d, lists accounts without one", r.StatusCode)
	}
}
