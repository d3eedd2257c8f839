package handlers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"weft/handlers"
	"weft/internal/testenv"
)

// The first administrator types the setup token above "Sign in with
// MockID", passes through the provider and lands in Weft (the page's
// Content-Security-Policy lets that form redirect to the provider); after
// signing out, the next person signs in with the plain button, and one
// with a password account links it by its password.
func TestBrowserSignsInWithSingleSignOn(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	token, err := handlers.IssueSetupToken(context.Background(), e.store)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Browser(t, 90*time.Second)
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil || strings.TrimPrefix(loc, e.base) != "/" {
			t.Fatalf("%s: the browser is at %q (%v), want /", what, loc, err)
		}
	}
	e.user("sub-root", "root@example.com", true)
	step("the first administrator signs in with the setup token",
		chromedp.Navigate(e.base+"/login"),
		typeInto(`[data-testid=sso-setup-token]`, token),
		click(`button[data-testid=sso-login]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	if u, err := e.store.UserByEmail(context.Background(), "root@example.com"); err != nil || u.Role != "admin" {
		t.Fatalf("the first account: %+v %v", u, err)
	}
	e.user("sub-next", "next@example.com", true)
	step("the next person signs in with the button",
		click(`[data-testid=logout]`),
		chromedp.WaitVisible(css(`form[data-testid=login]`)),
		click(`a[data-testid=sso-login]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	if u, err := e.store.UserByEmail(context.Background(), "next@example.com"); err != nil || u.Role != "member" {
		t.Fatalf("the second account: %+v %v", u, err)
	}
	// A password account with the provider's email is linked only with its
	// password: a wrong one is refused on the page, the right one signs in.
	if _, _, err := e.store.CreateUser(context.Background(), "pat@example.com", "pat", mustHash(t)); err != nil {
		t.Fatal(err)
	}
	e.user("sub-pat", "pat@example.com", true)
	pw := `[data-testid=sso-link-form] input[name=password]`
	if err := chromedp.Do(ctx,
		click(`[data-testid=logout]`),
		chromedp.WaitVisible(css(`form[data-testid=login]`)),
		click(`a[data-testid=sso-login]`),
		chromedp.WaitVisible(css(`form[data-testid=sso-link-form]`)),
		typeInto(pw, "not the password"),
		click(`[data-testid=sso-link-submit]`),
		chromedp.WaitVisible(css(`[data-testid=sso-link] [data-testid=error]`)),
	); err != nil {
		t.Fatalf("a wrong password on the link page: %v", err)
	}
	step("the password account is linked with its password",
		typeInto(pw, password),
		click(`[data-testid=sso-link-submit]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	if u, _ := e.store.UserByEmail(context.Background(), "pat@example.com"); len(e.identities(u.ID)) != 1 {
		t.Errorf("pat's identities: %+v", e.identities(u.ID))
	}
}
