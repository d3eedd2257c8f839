package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"weft/internal/testenv"
)

// An administrator opens /admin/users from /admin, searches, sees the
// accounts' rows and disables one, who then cannot sign in.
func TestBrowserAdminSearchesUsersAndDisablesOne(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	ctx := testenv.Browser(t, 90*time.Second)
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("the administrator registers",
		chromedp.Navigate(app.TS.URL+"/register"),
		typeInto(`input[name=email]`, "admin@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=register]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	alice := testenv.NewClient(t, app.TS.URL)
	alice.Register("alice@example.com", password)
	for _, email := range []string{"bob@example.com", "carol@example.org"} {
		testenv.NewClient(t, app.TS.URL).Register(email, password)
	}
	a, err := store.UserByEmail(context.Background(), "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`[data-testid=user-row][data-user-id="%d"]`, a.ID)

	step("open the user list from /admin",
		chromedp.Navigate(app.TS.URL+"/admin"),
		click(`[data-testid=users-link]`),
		waitFor(`document.querySelectorAll("[data-testid=user-row]").length === 4`),
	)
	step("search",
		typeInto(`[data-testid=user-search] input[name=q]`, "ALICE"),
		submit(`[data-testid=user-search]`),
		waitFor(`location.search.includes("q=ALICE") && document.querySelectorAll("[data-testid=user-row]").length === 1 && document.querySelector(`+
			fmt.Sprintf("%q", row)+`)`),
	)
	step("disable alice",
		click(row+` [data-testid=user-disable]`),
		waitFor(`document.querySelector("[data-testid=users-notice]") && document.querySelector(`+fmt.Sprintf("%q", row)+`)?.dataset.state === "disabled"`),
	)
	if r := alice.Get("/"); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("the disabled user's session still opens / (%d)", r.StatusCode)
	}
	if r := alice.Post("/login", url.Values{"email": {"alice@example.com"}, "password": {password}}); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the disabled user signs in: %d", r.StatusCode)
	}
	step("the filter for disabled accounts lists her alone",
		chromedp.Navigate(app.TS.URL+"/admin/users?state=disabled"),
		waitFor(`document.querySelectorAll("[data-testid=user-row]").length === 1 && document.querySelector(`+fmt.Sprintf("%q", row)+`)`),
	)
}
