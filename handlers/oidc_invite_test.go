package handlers_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"weft/db"
	"weft/handlers"
)

// ssoFromInvite opens an invite link's page and clicks "Sign in with
// MockID" there, following the redirects through the provider and back.
func (e *ssoEnv) ssoFromInvite(b *http.Client, token string) (*http.Response, string) {
	e.t.Helper()
	page, err := b.Get(e.base + "/invite/" + token)
	if err != nil {
		e.t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	href := ""
	if _, after, ok := strings.Cut(string(body), `<a class="sso-button" href="`); ok {
		href, _, _ = strings.Cut(after, `"`)
	}
	if !strings.HasPrefix(href, "/auth/oidc/login?invite=") {
		e.t.Fatalf("the invite page's single sign-on link is %q: %.800s", href, body)
	}
	resp, err := b.Get(e.base + html.UnescapeString(href))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

// Invite-only sign-up: a person joins by single sign-on from an invite
// link's page (even when single sign-on is the only way in), the invite is
// used up, and without one — or with one for another address — nobody does.
func TestSingleSignOnJoinsAnInviteOnlyServerFromAnInviteLink(t *testing.T) {
	t.Parallel()
	e := startSSO(t, func(c *handlers.Config) { c.OIDC.Only = true })
	ctx := context.Background()
	admin, _, err := e.store.CreateUser(ctx, "admin@example.com", "admin", mustHash(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetSetting(ctx, "signup_mode", db.SignupInvite); err != nil {
		t.Fatal(err)
	}
	week := time.Now().Add(7 * 24 * time.Hour)
	if _, err := e.store.CreateInvite(ctx, admin.ID, "invite-for-ivy", "ivy@example.com", week); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CreateInvite(ctx, admin.ID, "invite-for-anyone", "", week); err != nil {
		t.Fatal(err)
	}

	// Single sign-on is the only way in: the invite page has no password form.
	r, err := e.browser().Get(e.base + "/invite/invite-for-ivy")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusOK || strings.Contains(string(page), `type="password"`) {
		t.Errorf("the invite page with OIDC only = %d: %.800s", r.StatusCode, page)
	}
	e.user("sub-ivy", "ivy@example.com", true)
	e.refused(e.browser(), http.StatusForbidden, "by invitation only")
	e.user("sub-mallory", "mallory@example.com", true)
	if resp, body := e.ssoFromInvite(e.browser(), "invite-for-ivy"); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(body, "for another email address") {
		t.Errorf("ivy's invite used by mallory = %d: %.300s", resp.StatusCode, body)
	}
	if n := e.users(); n != 1 {
		t.Fatalf("%d accounts after refusals", n)
	}

	e.user("sub-ivy", "ivy@example.com", true)
	if resp, body := e.ssoFromInvite(e.browser(), "invite-for-ivy"); resp.StatusCode != http.StatusOK ||
		resp.Request.URL.Path != "/" || !strings.Contains(body, `data-testid="composer"`) {
		t.Fatalf("ivy from her invite = %d at %s: %.300s", resp.StatusCode, resp.Request.URL, body)
	}
	if _, err := e.store.UserByEmail(ctx, "ivy@example.com"); err != nil {
		t.Fatalf("ivy's account: %v", err)
	}
	if _, err := e.store.CheckInvite(ctx, "invite-for-ivy", ""); err == nil {
		t.Error("ivy's invite is still usable")
	}
	e.user("sub-ivan", "ivan@example.com", true)
	if resp, body := e.ssoFromInvite(e.browser(), "invite-for-anyone"); resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
		t.Fatalf("ivan from an invite for anyone = %d at %s: %.300s", resp.StatusCode, resp.Request.URL, body)
	}
	e.user("sub-olga", "olga@example.com", true)
	resp, body := e.signIn(e.browser(), nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "by invitation only") {
		t.Errorf("a sign-in without an invite after the invites were used = %d: %.300s", resp.StatusCode, body)
	}
	if n := e.users(); n != 3 {
		t.Errorf("%d accounts, want the admin, ivy and ivan", n)
	}
}
