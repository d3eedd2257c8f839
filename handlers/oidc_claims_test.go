package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"weft/handlers"
	"weft/internal/testenv"
)

// rawUser is a provider account whose ID token carries claims exactly as
// given: email_verified as any JSON value (or none), an azp, more audiences.
type rawUser struct {
	subject, email string
	verified       any // nil: no email_verified claim at all
	azp            string
	moreAudiences  []string
}

func (u *rawUser) ID() string { return u.subject }

func (u *rawUser) Userinfo([]string) ([]byte, error) {
	return json.Marshal(map[string]string{"sub": u.subject, "email": u.email})
}

func (u *rawUser) Claims(_ []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	base.Audience = append(base.Audience, u.moreAudiences...)
	return &struct {
		*mockoidc.IDTokenClaims
		Email         string `json:"email,omitempty"`
		EmailVerified any    `json:"email_verified,omitempty"`
		AZP           string `json:"azp,omitempty"`
	}{base, u.email, u.verified, u.azp}, nil
}

// WEFT_OIDC_TRUST_EMAIL stands in for a missing email_verified; a provider
// that says plainly that an email is not verified is believed.
func TestSingleSignOnTrustEmailNeverOverridesAProviderThatSaysTheEmailIsNotVerified(t *testing.T) {
	t.Parallel()
	e := startSSO(t, func(c *handlers.Config) { c.OIDC.TrustEmail = true })
	testenv.NewClient(t, e.base).Register("erin@example.com", password)
	erin, _ := e.store.UserByEmail(context.Background(), "erin@example.com")
	for _, v := range []any{false, "false"} {
		e.idp.QueueUser(&rawUser{subject: "sub-mallory", email: "erin@example.com", verified: v})
		e.refused(e.browser(), http.StatusForbidden, "has not verified your email address")
	}
	if ids := e.identities(erin.ID); len(ids) != 0 {
		t.Errorf("an email the provider called unverified was linked: %+v", ids)
	}
	e.idp.QueueUser(&rawUser{subject: "sub-erin", email: "erin@example.com"}) // no claim: trusted (and her password given)
	if u := e.linkedIn(e.browser(), "erin@example.com", password); u.ID != erin.ID {
		t.Errorf("signed in to %d, want erin's %d", u.ID, erin.ID)
	}
}

// An ID token issued to another client (its azp), though it also names
// ours among its audiences, signs nobody in.
func TestSingleSignOnRefusesAnIDTokenAuthorizedForAnotherClient(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	e.idp.QueueUser(&rawUser{subject: "sub-a", email: "a@example.com", verified: true,
		azp: "another-client", moreAudiences: []string{"another-client"}})
	e.refused(e.browser(), http.StatusUnauthorized, "could not be completed")
	if n := e.users(); n != 0 {
		t.Errorf("%d accounts made by another client's token", n)
	}
	e.idp.QueueUser(&rawUser{subject: "sub-a", email: "a@example.com", verified: "true",
		azp: e.idp.ClientID, moreAudiences: []string{"another-client"}})
	e.signedIn(e.browser(), "a@example.com")
}

// A provider's name with a control character (PostgreSQL refuses a NUL)
// still makes the account, under the name without it.
func TestSingleSignOnMakesAnAccountWhoseProviderNameHasControlCharacters(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	e.idp.QueueUser(&mockoidc.MockUser{Subject: "sub-nul", Email: "nul@example.com", EmailVerified: true, PreferredUsername: "nul\x00l"})
	if u := e.signedIn(e.browser(), "nul@example.com"); u.DisplayName != "null" {
		t.Errorf("display name %q", u.DisplayName)
	}
}
