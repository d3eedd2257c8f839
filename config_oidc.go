package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"weft/handlers"
)

// oidcVars are the single sign-on settings; any of them without
// WEFT_OIDC_ISSUER is a mistake worth stopping for.
var oidcVars = []string{"WEFT_OIDC_CLIENT_ID", "WEFT_OIDC_CLIENT_SECRET", "WEFT_OIDC_CLIENT_SECRET_FILE",
	"WEFT_OIDC_ALLOWED_DOMAINS", "WEFT_OIDC_ONLY", "WEFT_OIDC_TRUST_EMAIL", "WEFT_OIDC_NAME", "WEFT_OIDC_SCOPES"}

// oidcConfig reads single sign-on (OpenID Connect), on when
// WEFT_OIDC_ISSUER is set: WEFT_OIDC_CLIENT_ID (required), the secret
// (WEFT_OIDC_CLIENT_SECRET or a file named by WEFT_OIDC_CLIENT_SECRET_FILE;
// none for a public client), WEFT_OIDC_ALLOWED_DOMAINS, WEFT_OIDC_ONLY,
// WEFT_OIDC_TRUST_EMAIL,
// WEFT_OIDC_NAME and WEFT_OIDC_SCOPES. The provider sends browsers back to
// WEFT_PUBLIC_URL/auth/oidc/callback, so the public URL is required.
func oidcConfig(public *url.URL) (*handlers.OIDCConfig, error) {
	var err error
	issuer := os.Getenv("WEFT_OIDC_ISSUER")
	if issuer == "" {
		for _, k := range oidcVars {
			if os.Getenv(k) != "" {
				return nil, fmt.Errorf("%s is set but WEFT_OIDC_ISSUER is not: set the provider's issuer URL to turn single sign-on on, or unset %s", k, k)
			}
		}
		return nil, nil
	}
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || (u.Scheme != "https" && !(u.Scheme == "http" && listensOnLoopback(u.Hostname()))) {
		return nil, fmt.Errorf("WEFT_OIDC_ISSUER must be the provider's https:// issuer URL (http:// only on this machine), got %q", issuer)
	}
	if public == nil {
		return nil, errors.New("WEFT_OIDC_ISSUER is set but WEFT_PUBLIC_URL is not: single sign-on sends browsers back to WEFT_PUBLIC_URL/auth/oidc/callback, so set WEFT_PUBLIC_URL to the URL users reach Weft at")
	}
	c := &handlers.OIDCConfig{Issuer: issuer, ClientID: os.Getenv("WEFT_OIDC_CLIENT_ID"), Name: strings.TrimSpace(os.Getenv("WEFT_OIDC_NAME"))}
	if c.ClientID == "" {
		return nil, errors.New("WEFT_OIDC_ISSUER is set but WEFT_OIDC_CLIENT_ID is not: set the client id registered at the provider")
	}
	secret, file := os.Getenv("WEFT_OIDC_CLIENT_SECRET"), os.Getenv("WEFT_OIDC_CLIENT_SECRET_FILE")
	switch {
	case secret != "" && file != "":
		return nil, errors.New("set WEFT_OIDC_CLIENT_SECRET or WEFT_OIDC_CLIENT_SECRET_FILE, not both")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("WEFT_OIDC_CLIENT_SECRET_FILE: %w", err)
		}
		if secret = strings.TrimSpace(string(b)); secret == "" {
			return nil, fmt.Errorf("WEFT_OIDC_CLIENT_SECRET_FILE: %s is empty", file)
		}
	}
	c.ClientSecret = secret
	for _, d := range strings.Split(os.Getenv("WEFT_OIDC_ALLOWED_DOMAINS"), ",") {
		d = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(d), "@")))
		if d == "" {
			continue
		}
		if strings.ContainsAny(d, "@/: ") || !strings.Contains(d, ".") && d != "localhost" || net.ParseIP(d) != nil {
			return nil, fmt.Errorf("WEFT_OIDC_ALLOWED_DOMAINS lists email domains separated by commas, such as example.com,example.org; got %q", d)
		}
		c.AllowedDomains = append(c.AllowedDomains, d)
	}
	if c.Only, err = envBool("WEFT_OIDC_ONLY", "single sign-on is the only way in"); err != nil {
		return nil, err
	}
	if c.TrustEmail, err = envBool("WEFT_OIDC_TRUST_EMAIL", "every email the provider gives counts as verified"); err != nil {
		return nil, err
	}
	for _, s := range strings.FieldsFunc(os.Getenv("WEFT_OIDC_SCOPES"), func(r rune) bool { return r == ',' || r == ' ' }) {
		c.Scopes = append(c.Scopes, s)
	}
	return c, nil
}

// envBool reads a true/false switch (also on/off, yes/no, 1/0); unset is false.
func envBool(key, meaning string) (bool, error) {
	switch v := strings.ToLower(strings.TrimSpace(os.Getenv(key))); v {
	case "", "false", "off", "0", "no":
		return false, nil
	case "true", "on", "1", "yes":
		return true, nil
	default:
		return false, fmt.Errorf("%s must be true or false (%s), got %q", key, meaning, v)
	}
}
