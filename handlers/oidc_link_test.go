package handlers_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"weft/db"
	"weft/handlers"
	"weft/internal/testenv"
)

// toLinkPage signs in with MockID and asserts the browser ended on the page
// asking for the password of the existing account with the email, signed
// in as nobody; it returns the page.
func (e *ssoEnv) toLinkPage(b *http.Client) string {
	e.t.Helper()
	resp, body := e.signIn(b, nil)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/auth/oidc/link" ||
		!strings.Contains(body, "An account with this email") || !strings.Contains(body, "Enter its password to link MockID to it") {
		e.t.Fatalf("single sign-on ended at %s with %d, want the link page: %.600s", resp.Request.URL, resp.StatusCode, body)
	}
	e.anonymous(b)
	return body
}

// link submits the link page's form and follows the redirects.
func (e *ssoEnv) link(b *http.Client, form url.Values) (*http.Response, string) {
	e.t.Helper()
	resp, err := b.PostForm(e.base+"/auth/oidc/link", form)
	if err != nil {
		e.t.Fatalf("link: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// linkedIn signs in with MockID, gives the existing account's password on
// the link page and asserts the browser ended on the home page, signed in.
func (e *ssoEnv) linkedIn(b *http.Client, email, pw string) db.User {
	e.t.Helper()
	e.toLinkPage(b)
	resp, body := e.link(b, url.Values{"password": {pw}})
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" || !strings.Contains(body, `data-testid="composer"`) {
		e.t.Fatalf("the link of %s ended at %s with %d: %.500s", email, resp.Request.URL, resp.StatusCode, body)
	}
	u, err := e.store.UserByEmail(context.Background(), email)
	if err != nil {
		e.t.Fatalf("the account of %s: %v", email, err)
	}
	return u
}

// Account pre-hijacking: someone registers another person's address with
// a password before that person first comes by single sign-on. The
// person's verified identity is not linked to that account without its
// password, so they are never signed in to an account another controls.
func TestSingleSignOnDoesNotLinkAPreMadeAccountWithoutItsPassword(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	testenv.NewClient(t, e.base).Register("admin@example.com", password)
	mallory := testenv.NewClient(t, e.base)
	mallory.Register("victim@example.com", password)
	squat, _ := e.store.UserByEmail(context.Background(), "victim@example.com")

	e.user("sub-victim", "victim@example.com", true)
	b := e.browser()
	page := e.toLinkPage(b)
	if !strings.Contains(page, "signs out every other session") || !strings.Contains(page, `data-testid="sso-link-cancel"`) ||
		!strings.Contains(page, "Ask the server's administrator") {
		t.Errorf("the link page does not say what linking does, how to cancel or whom to ask: %.1500s", page)
	}
	if ids := e.identities(squat.ID); len(ids) != 0 {
		t.Fatalf("the identity was linked before the password was given: %+v", ids)
	}
	// The victim does not know the password mallory chose.
	resp, body := e.link(b, url.Values{"password": {"the victim's own password"}})
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "Nothing was linked") ||
		!strings.Contains(body, `data-testid="sso-link-form"`) {
		t.Errorf("a wrong password = %d: %.600s", resp.StatusCode, body)
	}
	e.anonymous(b)
	// Cancelling ends the wait: the password no longer links anything.
	resp, _ = e.link(b, url.Values{"cancel": {"1"}})
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/login" {
		t.Errorf("cancel ended at %s with %d", resp.Request.URL, resp.StatusCode)
	}
	if resp, body := e.link(b, url.Values{"password": {password}}); resp.StatusCode != http.StatusBadRequest ||
		!strings.Contains(body, "expired or was already used") {
		t.Errorf("the password after cancel = %d: %.300s", resp.StatusCode, body)
	}
	e.anonymous(b)
	if ids := e.identities(squat.ID); len(ids) != 0 {
		t.Errorf("the identity was linked to the pre-made account: %+v", ids)
	}
	if r := mallory.Get("/settings"); r.StatusCode != http.StatusOK {
		t.Errorf("mallory's session = %d: nothing should have changed for it", r.StatusCode)
	}
}

// With the account's password the identity is linked, this browser signs
// in, and every other session of the account ends: whoever made the
// account before (or left a session open) is signed out.
func TestLinkingByPasswordEndsTheAccountsOtherSessions(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	first := testenv.NewClient(t, e.base)
	first.Register("carol@example.com", password)
	second := testenv.NewClient(t, e.base)
	second.Login("carol@example.com", password)
	carol, _ := e.store.UserByEmail(context.Background(), "carol@example.com")

	e.user("sub-carol", "carol@example.com", true)
	b := e.browser()
	if u := e.linkedIn(b, "carol@example.com", password); u.ID != carol.ID {
		t.Fatalf("signed in to %d, want carol's %d", u.ID, carol.ID)
	}
	for name, c := range map[string]*testenv.Client{"first": first, "second": second} {
		if r := c.Get("/settings"); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/login" {
			t.Errorf("the %s session after the link = %d %q, want signed out", name, r.StatusCode, r.Header.Get("Location"))
		}
	}
	if r, err := b.Get(e.base + "/settings"); err != nil || r.StatusCode != http.StatusOK || r.Request.URL.Path != "/settings" {
		t.Errorf("the linking browser's session: %v %v", r, err)
	}
	if ids := e.identities(carol.ID); len(ids) != 1 || ids[0].Subject != "sub-carol" {
		t.Errorf("carol's identities: %+v", ids)
	}
	// The link is used up: signed out, this browser's password links nothing again.
	if r, err := b.PostForm(e.base+"/logout", nil); err != nil || r.Request.URL.Path != "/login" {
		t.Fatalf("logout: %v %v", r, err)
	}
	if resp, _ := e.link(b, url.Values{"password": {password}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("the link page after the link was used = %d", resp.StatusCode)
	}
}

// A wrong password on the link page counts as a failed sign-in of the
// account and of the address, against the same limits as /login.
func TestAWrongPasswordOnTheLinkPageCountsAgainstTheSignInLimits(t *testing.T) {
	t.Parallel()
	e := startSSO(t, func(c *handlers.Config) {
		c.LoginLimit = handlers.LoginLimit{PerIP: 100, PerAccount: 3, Window: time.Hour}
	})
	testenv.NewClient(t, e.base).Register("dave@example.com", password)
	dave, _ := e.store.UserByEmail(context.Background(), "dave@example.com")
	e.user("sub-dave", "dave@example.com", true)
	b := e.browser()
	e.toLinkPage(b)
	for i := range 3 {
		if resp, body := e.link(b, url.Values{"password": {"guess number " + string(rune('a'+i))}}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong password %d = %d: %.300s", i, resp.StatusCode, body)
		}
	}
	resp, body := e.link(b, url.Values{"password": {password}})
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "Too many failed sign-in attempts") {
		t.Errorf("the right password after 3 wrong ones = %d: %.300s", resp.StatusCode, body)
	}
	if r := testenv.NewClient(t, e.base).Post("/login", url.Values{"email": {"dave@example.com"}, "password": {password}}); r.StatusCode != http.StatusTooManyRequests {
		t.Errorf("password sign-in of the account after 3 wrong link passwords = %d, want 429", r.StatusCode)
	}
	if ids := e.identities(dave.ID); len(ids) != 0 {
		t.Errorf("linked although refused: %+v", ids)
	}
}

// An account made by single sign-on has no password of its own, so
// another provider's identity with its email cannot prove it is the
// account's: the page says to ask the administrator, whose password-reset
// link gives it one.
func TestAnAccountWithoutAPasswordOfItsOwnCannotBeLinkedByEmail(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	testenv.NewClient(t, e.base).Register("admin@example.com", password)
	e.user("sub-ada", "ada@example.com", true)
	ada := e.signedIn(e.browser(), "ada@example.com")
	if ada.HasPassword {
		t.Fatalf("an account made by single sign-on has a password of its own: %+v", ada)
	}
	// The identity is from another provider now (the server moved).
	if _, err := e.store.Pool.Exec(context.Background(), "UPDATE user_identities SET issuer = 'https://old-id.example' WHERE user_id = $1",
		ada.ID); err != nil {
		t.Fatal(err)
	}
	e.user("sub-ada-2", "ada@example.com", true)
	e.refused(e.browser(), http.StatusConflict, "has no password to confirm that it is yours")
	if ids := e.identities(ada.ID); len(ids) != 1 || ids[0].Subject != "sub-ada" {
		t.Errorf("ada's identities: %+v", ids)
	}
	// A password set for it (the administrator's reset link) makes it linkable.
	if _, err := e.store.SetPassword(context.Background(), ada.ID, mustHash(t), ""); err != nil {
		t.Fatal(err)
	}
	e.user("sub-ada-2", "ada@example.com", true)
	e.linkedIn(e.browser(), "ada@example.com", password)
	if ids := e.identities(ada.ID); len(ids) != 2 {
		t.Errorf("ada's identities after the link: %+v", ids)
	}
}

// The identity waits in this browser's session only: another browser
// cannot use it, and the session lasts 10 minutes at most.
func TestTheLinkWaitingForAPasswordBelongsToOneBrowserForTenMinutes(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	testenv.NewClient(t, e.base).Register("erin@example.com", password)
	erin, _ := e.store.UserByEmail(context.Background(), "erin@example.com")
	e.user("sub-erin", "erin@example.com", true)
	c := testenv.NewClient(t, e.base)
	u := e.flow(c)
	if r := c.Get(u.RequestURI()); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/auth/oidc/link" {
		t.Fatalf("callback = %d %q: %.300s", r.StatusCode, r.Header.Get("Location"), r.Body)
	}
	// The callback cannot be replayed to sign in.
	if r := c.Get(u.RequestURI()); r.StatusCode != http.StatusBadRequest {
		t.Errorf("the callback again = %d", r.StatusCode)
	}
	if r := c.Get("/auth/oidc/link"); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "erin@example.com") {
		t.Fatalf("the link page = %d: %.300s", r.StatusCode, r.Body)
	}
	var expiry time.Time
	if err := e.store.Pool.QueryRow(context.Background(), "SELECT expiry FROM sessions WHERE token = $1", c.SessionCookie()).Scan(&expiry); err != nil {
		t.Fatal(err)
	}
	if left := time.Until(expiry); left > 10*time.Minute+5*time.Second {
		t.Errorf("the session holding the identity lives %v", left)
	}
	if r := testenv.NewClient(t, e.base).Post("/auth/oidc/link", url.Values{"password": {password}}); r.StatusCode != http.StatusBadRequest {
		t.Errorf("another browser's password = %d", r.StatusCode)
	}
	// Past its time the session and the identity in it are gone.
	if _, err := e.store.Pool.Exec(context.Background(), "UPDATE sessions SET expiry = now() - interval '1 second' WHERE token = $1",
		c.SessionCookie()); err != nil {
		t.Fatal(err)
	}
	if r := c.Post("/auth/oidc/link", url.Values{"password": {password}}); r.StatusCode != http.StatusBadRequest ||
		!strings.Contains(r.Body, "expired") {
		t.Errorf("the password after ten minutes = %d: %.300s", r.StatusCode, r.Body)
	}
	if ids := e.identities(erin.ID); len(ids) != 0 {
		t.Errorf("linked: %+v", ids)
	}
}
