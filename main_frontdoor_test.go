package main

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"weft/internal/fakeollama"
	"weft/internal/testenv"
)

func TestMetricsCanBeServedOnTheirOwnAddressWithAToken(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	metricsAddr := freeAddr(t)
	p := startWeft(t, freeAddr(t), "DATABASE_URL="+testenv.URLFor(t, store), "OLLAMA_HOST="+fakeollama.New(t).URL,
		"WEFT_METRICS_ADDR="+metricsAddr, "WEFT_METRICS_TOKEN=scrape-me")
	if r, err := http.Get(p.base + "/metrics"); err != nil || r.StatusCode != http.StatusNotFound {
		t.Fatalf("/metrics on the main address = %v, %v; want 404", r, err)
	}
	get := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("metrics listener: %v", err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Fatalf("metrics without the token = %d", code)
	}
	code, body := get("scrape-me")
	if code != http.StatusOK || !strings.Contains(body, `route="/readyz"`) {
		t.Fatalf("metrics with the token = %d: %.300s", code, body)
	}
}

func TestBeyondLoopbackTheFirstAdministratorNeedsTheTokenFromTheLog(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	_, port, _ := strings.Cut(freeAddr(t), ":")
	p := startWeft(t, "0.0.0.0:"+port, "DATABASE_URL="+testenv.URLFor(t, store), "OLLAMA_HOST="+fakeollama.New(t).URL)
	m := regexp.MustCompile(`setup_token=(\S+)`).FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("no setup token in the log:\n%s", p.logs.String())
	}
	c := testenv.NewClient(t, p.base)
	if r := c.Post("/register", url.Values{"email": {"first@example.com"}, "password": {"correct horse battery"}}); r.StatusCode != http.StatusForbidden {
		t.Fatalf("first sign-up without the token = %d", r.StatusCode)
	}
	r := c.Post("/register", url.Values{"email": {"first@example.com"}, "password": {"correct horse battery"}, "setup_token": {m[1]}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("first sign-up with the logged token = %d: %.300s", r.StatusCode, r.Body)
	}
}

func TestAFirstAdministratorNeedsASetupTokenBeyondLoopbackOrBehindAPublicName(t *testing.T) {
	for _, c := range []struct {
		addr, public string
		want         bool
	}{
		{"127.0.0.1:8080", "", false},
		{"127.0.0.1:8080", "http://localhost:8080", false},
		{"127.0.0.1:8080", "https://chat.example.org", true}, // behind a proxy
		{"0.0.0.0:8080", "", true},
		{"0.0.0.0:8080", "https://chat.example.org", true},
	} {
		var u *url.URL
		if c.public != "" {
			u, _ = url.Parse(c.public)
		}
		if got := needsSetupToken(c.addr, u); got != c.want {
			t.Errorf("needsSetupToken(%q, %q) = %v, want %v", c.addr, c.public, got, c.want)
		}
	}
}

func TestOnlyLoopbackAddressesCountAsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:8080": true, "[::1]:8080": true, "127.0.0.5:80": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "192.168.1.5:8080": false, "weft.lan:8080": false,
	} {
		if got := listensOnLoopback(addr); got != want {
			t.Errorf("listensOnLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
