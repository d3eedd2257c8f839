package handlers_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
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
		"q=a%00b",
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

// Someone who knows the old password signs in while the account's password
// is being reset: the password was checked, then the reset ended every
// session, then the sign-in recorded its own. That session must not
// outlive the reset (it would keep the old password's holder in for a
// month). The sign-in is held between its password check and its session
// by a row lock on its login-failure bookkeeping.
func TestASignInWithThePasswordAResetReplacedMeanwhileGetsNoSession(t *testing.T) {
	t.Parallel()
	app, store, admin, _, m := adminAndMember(t, testenv.Options{})
	ctx := context.Background()
	link := resetURL.FindStringSubmatch(admin.Post(userPath(m.ID, "reset-link"), nil).Body)
	if link == nil {
		t.Fatal("no reset link")
	}
	// A failure row of the account that the sign-in deletes after its
	// password check (ClearLoginFailures), locked until the reset is done.
	if err := store.RecordLoginFailure(ctx, "email:member@example.com"); err != nil {
		t.Fatal(err)
	}
	tx, err := store.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM login_failures WHERE key = 'email:member@example.com' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	thief := testenv.NewClient(t, app.TS.URL)
	signedIn := make(chan int, 1)
	go func() {
		signedIn <- thief.Post("/login", url.Values{"email": {"member@example.com"}, "password": {password}}).StatusCode
	}()
	testwait.For(t, "the sign-in to check the password and wait", 10*time.Second, func() bool {
		var waiting bool
		_ = store.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting)
		return waiting
	})
	anon := testenv.NewClient(t, app.TS.URL)
	if r := anon.Post(link[1], url.Values{"password": {"a brand new passphrase"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("reset = %d", r.StatusCode)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	status := <-signedIn
	if r := thief.Get("/"); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("a sign-in with the replaced password (%d) has a session after the reset: / = %d", status, r.StatusCode)
	}
	if status != http.StatusUnauthorized {
		t.Errorf("the sign-in with the replaced password = %d, want 401", status)
	}
	var n int
	if err := store.Pool.QueryRow(ctx, "SELECT count(*) FROM user_sessions WHERE user_id = $1", m.ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d sessions of the member after the reset (%v)", n, err)
	}
}

// A reset link handed out before the account was disabled (to a mailbox
// that may be why it was disabled) sets no password while the account is
// disabled: whoever holds it could otherwise choose the password the
// account has when an administrator enables it again.
func TestAResetLinkSetsNoPasswordWhileItsAccountIsDisabled(t *testing.T) {
	t.Parallel()
	app, _, admin, member, m := adminAndMember(t, testenv.Options{})
	link := resetURL.FindStringSubmatch(admin.Post(userPath(m.ID, "reset-link"), nil).Body)
	if link == nil {
		t.Fatal("no reset link")
	}
	if r := admin.Post(userPath(m.ID, "disable"), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable = %d", r.StatusCode)
	}
	anon := testenv.NewClient(t, app.TS.URL)
	if r := anon.Get(link[1]); r.StatusCode != http.StatusGone {
		t.Errorf("the link of a disabled account opens: %d", r.StatusCode)
	}
	if r := anon.Post(link[1], url.Values{"password": {"the holder's choice"}}); r.StatusCode != http.StatusGone {
		t.Errorf("the link of a disabled account sets a password: %d", r.StatusCode)
	}
	if r := admin.Post(userPath(m.ID, "enable"), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("enable = %d", r.StatusCode)
	}
	if r := member.Post("/login", url.Values{"email": {"member@example.com"}, "password": {"the holder's choice"}}); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the password chosen through the link while disabled signs in: %d", r.StatusCode)
	}
	member.Login("member@example.com", password)
}

// A reset or invite link is shown once, in the answer to the form that
// made it: no cache (the browser's, a proxy's) keeps that answer.
func TestTheAnswersShowingANewResetOrInviteLinkAreNotStored(t *testing.T) {
	t.Parallel()
	_, _, admin, _, m := adminAndMember(t, testenv.Options{})
	reset := admin.Post(userPath(m.ID, "reset-link"), nil)
	invite := admin.Post("/admin/invites", url.Values{})
	for name, r := range map[string]testenv.Response{"reset link": reset, "invite": invite} {
		if r.StatusCode != http.StatusOK || r.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("the answer with a new %s = %d, Cache-Control %q; want no-store", name, r.StatusCode, r.Header.Get("Cache-Control"))
		}
	}
}

// The account being deleted sends a message after its runs were stopped
// and before the deletion's transaction (held here on the administrators'
// lock): the run that message started is deleted with the account, and
// its model request must end too, not go on for a model that is slow to
// say anything.
func TestARunStartedWhileItsAccountIsBeingDeletedIsStopped(t *testing.T) {
	t.Parallel()
	app, store, admin, member, m := adminAndMember(t, testenv.Options{})
	ctx := context.Background()
	tx, err := store.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('weft:admins', 0))"); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan int, 1)
	go func() {
		deleted <- admin.Post(userPath(m.ID, "delete"), url.Values{"confirm": {"member@example.com"}}).StatusCode
	}()
	testwait.For(t, "the deletion to stop the runs and wait for the lock", 10*time.Second, func() bool {
		var waiting bool
		_ = store.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting)
		return waiting
	})
	ws := regexp.MustCompile(`name="workspace_id" value="(\d+)"`).FindStringSubmatch(member.Get("/").Body)
	if ws == nil {
		t.Fatal("no composer")
	}
	if r := member.Post("/t", url.Values{"workspace_id": {ws[1]}, "content": {"[[hang]] still here"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("send = %d", r.StatusCode)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := app.Fake.WaitFor(wctx, func(recs []fakeollama.Recorded) bool {
		for _, r := range recs {
			if r.Chat != nil && len(r.Chat.Messages) > 0 && strings.Contains(r.Chat.Messages[len(r.Chat.Messages)-1].Content, "still here") {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("the model was not asked: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if status := <-deleted; status != http.StatusSeeOther {
		t.Fatalf("delete = %d", status)
	}
	cctx, cancelC := context.WithTimeout(ctx, 10*time.Second)
	defer cancelC()
	if err := app.Fake.WaitCancelled(cctx, 1); err != nil {
		t.Fatalf("the deleted account's model request goes on: %v", err)
	}
}
