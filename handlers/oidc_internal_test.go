package handlers

import (
	"encoding/json"
	"testing"
)

// email_verified counts only when the provider says so plainly: a JSON
// true or the string "true" some providers send.
func TestEmailVerifiedIsTrueOnlyWhenTheProviderSaysSoPlainly(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"email_verified": true}`: true, `{"email_verified": "true"}`: true,
		`{"email_verified": false}`: false, `{"email_verified": "false"}`: false, `{}`: false,
		`{"email_verified": "yes"}`: false, `{"email_verified": 1}`: false, `{"email_verified": null}`: false,
	} {
		var id ssoIdentity
		if err := json.Unmarshal([]byte(raw), &id); err != nil || (id.EmailVerified != nil && bool(*id.EmailVerified)) != want {
			t.Errorf("%s: verified %v (%v), want %v", raw, id.EmailVerified, err, want)
		}
	}
}

func TestSingleSignOnNamesDomainsAndOrigins(t *testing.T) {
	for email, want := range map[string]string{"a@Example.COM": "example.com", "a@b@c.org": "c.org", "nobody": "", "": "",
		"a@\u212Aite.example": "\u212Aite.example", "a@K\u0130TE.example": "k\u0130te.example"} {
		if got := emailDomain(email); got != want {
			t.Errorf("emailDomain(%q) = %q, want %q", email, got, want)
		}
	}
	for raw, want := range map[string]string{
		"https://id.example.org/realms/team": "https://id.example.org",
		"http://127.0.0.1:5556/dex":          "http://127.0.0.1:5556",
		"javascript:alert(1)":                "",
		"https://a.example;script-src *":     "",
		"":                                   "",
	} {
		if got := origin(raw); got != want {
			t.Errorf("origin(%q) = %q, want %q", raw, got, want)
		}
	}
	for _, c := range []struct {
		id   ssoIdentity
		want string
	}{
		{ssoIdentity{Name: " Ada Lovelace ", Username: "ada", Email: "ada@example.com"}, "Ada Lovelace"},
		{ssoIdentity{Username: "ada", Email: "ada@example.com"}, "ada"},
		{ssoIdentity{Email: "ada@example.com"}, "ada"},
		{ssoIdentity{Name: "Ada\x00 Love\nlace\u0085", Email: "ada@example.com"}, "Ada Lovelace"},
		{ssoIdentity{Name: "\x00\t", Username: "ada\x00", Email: "x@example.com"}, "ada"},
	} {
		if got := ssoDisplayName(c.id); got != c.want {
			t.Errorf("ssoDisplayName(%+v) = %q, want %q", c.id, got, c.want)
		}
	}
}
