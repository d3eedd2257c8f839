package handlers_test

import (
	"context"
	"net/http"
	"testing"

	"weft/handlers"
	"weft/internal/testenv"
)

// Unicode case mapping folds some letters onto ASCII ones: the Kelvin sign
// "K" and "İ" lower-case to "k" and "i" in Go and in PostgreSQL. A provider
// that verified an address at the look-alike domain (which its owner may
// register) must not sign in to the account of the ASCII address, nor pass
// WEFT_OIDC_ALLOWED_DOMAINS as the ASCII domain.
func TestSingleSignOnNeverTakesALookAlikeEmailForAnAccountsOrAnAllowedDomain(t *testing.T) {
	t.Parallel()
	e := startSSO(t, func(c *handlers.Config) { c.OIDC.AllowedDomains = []string{"kite.example"} })
	testenv.NewClient(t, e.base).Register("kate@kite.example", password)
	kate, err := e.store.UserByEmail(context.Background(), "kate@kite.example")
	if err != nil {
		t.Fatal(err)
	}
	// The Kelvin sign in the domain: not an allowed domain.
	e.user("sub-mallory", "kate@\u212Aite.example", true)
	e.refused(e.browser(), http.StatusForbidden, "may not sign in")
	e.user("sub-mallory", "mallory@k\u0130te.example", true)
	e.refused(e.browser(), http.StatusForbidden, "may not sign in")
	// In the local part: not kate's address.
	e.user("sub-mallory", "\u212Aate@kite.example", true)
	e.refused(e.browser(), http.StatusConflict, "only looks like this one")
	if ids := e.identities(kate.ID); len(ids) != 0 {
		t.Errorf("a look-alike email was linked to kate's account: %+v", ids)
	}
	if n := e.users(); n != 1 {
		t.Errorf("%d accounts: a look-alike email made one", n)
	}
	// Plain ASCII case still matches.
	e.user("sub-kate", "Kate@KITE.example", true)
	if u := e.linkedIn(e.browser(), "kate@kite.example", password); u.ID != kate.ID {
		t.Errorf("signed in to %d, want kate's %d", u.ID, kate.ID)
	}
}
