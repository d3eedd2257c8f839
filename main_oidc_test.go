package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"weft/internal/fakeollama"
	"weft/internal/testenv"
)

// A single sign-on provider that is down at start-up does not stop Weft:
// it serves, says so on the sign-in page, and passwords still work.
func TestWeftServesWhenTheSingleSignOnProviderIsDownAtStartUp(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	addr, idp := freeAddr(t), freeAddr(t) // nothing listens on idp
	p := startWeft(t, addr, "DATABASE_URL="+testenv.URLFor(t, store), "OLLAMA_HOST="+fakeollama.New(t).URL,
		"WEFT_PUBLIC_URL=http://"+addr, "WEFT_OIDC_ISSUER=http://"+idp+"/realms/weft", "WEFT_OIDC_CLIENT_ID=weft",
		"WEFT_OIDC_CLIENT_SECRET=secret", "WEFT_OIDC_NAME=Keycloak")
	resp, err := http.Get(p.base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Sign in with Keycloak") ||
		!strings.Contains(string(body), `data-testid="sso-unreachable"`) || !strings.Contains(string(body), `type="password"`) {
		t.Fatalf("/login = %d: %.800s", resp.StatusCode, body)
	}
	if !strings.Contains(p.logs.String(), "single sign-on is not reachable") {
		t.Errorf("the log does not say single sign-on is unreachable:\n%s", p.logs.String())
	}
	testenv.NewClient(t, p.base).Register("first@example.com", "correct horse battery")
}
