package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// A person makes an API token on /settings: it is shown once, works with
// the official OpenAI client, is gone from the page after a reload (only
// its row stays, with when it was last used), and Revoke stops it.
func TestBrowserAPITokenIsShownOnceWorksAndRevokes(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	u.open("/settings", `document.querySelector('[data-testid=token-create]')`)
	u.do("create a token",
		setValue(`[data-testid=token-create] input[name=name]`, "my script"),
		click(`[data-testid=token-create] button[type=submit]`),
		waitFor(`document.querySelector('[data-testid=token-value]')`))
	value := u.str(`document.querySelector('[data-testid=token-value]').textContent.trim()`)
	if !strings.HasPrefix(value, "weft_") || len(value) != 48 {
		t.Fatalf("the token shown is %q", value)
	}
	ctx := context.Background()
	client := openAIClient(u.app, value)
	if _, err := client.Models.List(ctx); err != nil {
		t.Fatalf("the new token does not work: %v", err)
	}

	u.act("reload", chromedp.Reload(), `document.querySelector('[data-testid=token-row]')`)
	if u.yes(`document.querySelector('[data-testid=token-value]')`) {
		t.Error("the token is shown again after a reload")
	}
	if body := u.str(`document.body.innerHTML`); strings.Contains(body, value) {
		t.Error("the page still holds the token's value")
	}
	if got := u.str(`document.querySelector('[data-testid=token-last-used]').textContent.trim()`); got == "never" {
		t.Error("the token's last use is not shown")
	}
	if got := u.str(`document.querySelector('[data-testid=token-scopes]').textContent.trim()`); got != "chat" {
		t.Errorf("scopes shown = %q", got)
	}

	u.do("revoke it", click(`[data-testid=token-revoke]`), waitFor(`document.querySelector('[data-testid=token-notice]')`))
	if u.yes(`document.querySelector('[data-testid=token-row]')`) {
		t.Error("the revoked token is still listed")
	}
	if _, err := client.Models.List(ctx); apiStatus(err) != http.StatusUnauthorized {
		t.Errorf("the revoked token = %v, want 401", err)
	}
}
