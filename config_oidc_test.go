package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func clearOIDCEnv(t *testing.T) {
	for _, k := range append([]string{"WEFT_OIDC_ISSUER", "WEFT_PUBLIC_URL"}, oidcVars...) {
		t.Setenv(k, "")
	}
}

// WEFT_OIDC_ISSUER turns single sign-on on with its client, secret (or a
// secret file), allowed domains, OIDC-only switch, name and scopes; the
// redirect URL comes from WEFT_PUBLIC_URL.
func TestConfigOIDCReadsTheProviderClientDomainsAndSwitches(t *testing.T) {
	clearOIDCEnv(t)
	c, err := loadConfig()
	if err != nil || c.oidc != nil {
		t.Fatalf("without WEFT_OIDC_ISSUER: %+v, %v", c.oidc, err)
	}
	t.Setenv("WEFT_PUBLIC_URL", "https://chat.example.org")
	t.Setenv("WEFT_OIDC_ISSUER", "https://id.example.org/realms/team")
	t.Setenv("WEFT_OIDC_CLIENT_ID", "weft")
	t.Setenv("WEFT_OIDC_CLIENT_SECRET", "s3cret")
	t.Setenv("WEFT_OIDC_ALLOWED_DOMAINS", " Example.com, @example.org ,")
	t.Setenv("WEFT_OIDC_ONLY", "true")
	t.Setenv("WEFT_OIDC_NAME", "Keycloak")
	t.Setenv("WEFT_OIDC_SCOPES", "email profile,groups")
	t.Setenv("WEFT_OIDC_TRUST_EMAIL", "on")
	c, err = loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	o := c.oidc
	if o == nil || o.Issuer != "https://id.example.org/realms/team" || o.ClientID != "weft" || o.ClientSecret != "s3cret" ||
		!slices.Equal(o.AllowedDomains, []string{"example.com", "example.org"}) || !o.Only || o.Name != "Keycloak" ||
		!slices.Equal(o.Scopes, []string{"email", "profile", "groups"}) || !o.TrustEmail {
		t.Fatalf("read %+v", o)
	}
	if ac := appConfig(c); ac.HTTP.OIDC != o {
		t.Errorf("the handlers do not get the single sign-on settings: %+v", ac.HTTP.OIDC)
	}

	t.Setenv("WEFT_OIDC_CLIENT_SECRET", "")
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte("from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WEFT_OIDC_CLIENT_SECRET_FILE", file)
	t.Setenv("WEFT_OIDC_ONLY", "")
	t.Setenv("WEFT_OIDC_TRUST_EMAIL", "")
	if c, err = loadConfig(); err != nil || c.oidc.ClientSecret != "from-a-file" || c.oidc.Only || c.oidc.TrustEmail {
		t.Errorf("the secret from a file, OIDC-only off by default: %+v, %v", c.oidc, err)
	}
	// A public client (PKCE alone) has no secret.
	t.Setenv("WEFT_OIDC_CLIENT_SECRET_FILE", "")
	if c, err = loadConfig(); err != nil || c.oidc.ClientSecret != "" {
		t.Errorf("no secret: %+v, %v", c.oidc, err)
	}
	// http:// is for a provider on this machine only.
	t.Setenv("WEFT_OIDC_ISSUER", "http://127.0.0.1:5556/dex")
	if _, err = loadConfig(); err != nil {
		t.Errorf("a loopback http issuer: %v", err)
	}
}

// Every mistake stops start-up with a message naming the variable.
func TestConfigOIDCRefusesAnIncompleteOrWrongConfiguration(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := map[string]string{"WEFT_PUBLIC_URL": "https://chat.example.org", "WEFT_OIDC_ISSUER": "https://id.example.org",
		"WEFT_OIDC_CLIENT_ID": "weft", "WEFT_OIDC_CLIENT_SECRET": "s"}
	for _, c := range []struct {
		name string
		set  map[string]string
		want string
	}{
		{"a client without an issuer", map[string]string{"WEFT_OIDC_ISSUER": "", "WEFT_OIDC_CLIENT_ID": "weft", "WEFT_OIDC_CLIENT_SECRET": ""},
			"WEFT_OIDC_CLIENT_ID is set but WEFT_OIDC_ISSUER is not"},
		{"OIDC-only without an issuer", map[string]string{"WEFT_OIDC_ISSUER": "", "WEFT_OIDC_CLIENT_ID": "", "WEFT_OIDC_CLIENT_SECRET": "", "WEFT_OIDC_ONLY": "true"},
			"WEFT_OIDC_ONLY is set but WEFT_OIDC_ISSUER is not"},
		{"no public URL", map[string]string{"WEFT_PUBLIC_URL": ""}, "WEFT_OIDC_ISSUER is set but WEFT_PUBLIC_URL is not"},
		{"no client id", map[string]string{"WEFT_OIDC_CLIENT_ID": ""}, "WEFT_OIDC_CLIENT_ID is not"},
		{"a plain-http issuer elsewhere", map[string]string{"WEFT_OIDC_ISSUER": "http://id.example.org"}, "WEFT_OIDC_ISSUER must be"},
		{"not a URL", map[string]string{"WEFT_OIDC_ISSUER": "id.example.org"}, "WEFT_OIDC_ISSUER must be"},
		{"two secrets", map[string]string{"WEFT_OIDC_CLIENT_SECRET_FILE": secretFile}, "not both"},
		{"a missing secret file", map[string]string{"WEFT_OIDC_CLIENT_SECRET": "", "WEFT_OIDC_CLIENT_SECRET_FILE": "/nonexistent/secret"}, "WEFT_OIDC_CLIENT_SECRET_FILE"},
		{"an address among domains", map[string]string{"WEFT_OIDC_ALLOWED_DOMAINS": "example.com,bob@example.org"}, "WEFT_OIDC_ALLOWED_DOMAINS"},
		{"a URL among domains", map[string]string{"WEFT_OIDC_ALLOWED_DOMAINS": "https://example.com"}, "WEFT_OIDC_ALLOWED_DOMAINS"},
		{"OIDC-only not a boolean", map[string]string{"WEFT_OIDC_ONLY": "sometimes"}, "WEFT_OIDC_ONLY must be true or false"},
		{"trust-email not a boolean", map[string]string{"WEFT_OIDC_TRUST_EMAIL": "maybe"}, "WEFT_OIDC_TRUST_EMAIL must be true or false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			clearOIDCEnv(t)
			for k, v := range good {
				t.Setenv(k, v)
			}
			for k, v := range c.set {
				t.Setenv(k, v)
			}
			if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}
