package handlers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/mail"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"weft/db"
)

// ssoOutcome is what account decided: sign in to user (workspace: a new
// account's default one), refuse (msg, with status), or ask for the
// password of user, the existing account with the identity's email, before
// linking the identity to it (link; see oidc_link.go).
type ssoOutcome struct {
	user      db.User
	workspace int64
	status    int
	msg       string
	link      bool
}

func refuseSSO(status int, msg string) (ssoOutcome, error) {
	return ssoOutcome{status: status, msg: msg}, nil
}

// account decides which account a verified identity signs in to:
//
//  1. with WEFT_OIDC_ALLOWED_DOMAINS, only a verified email of a listed
//     domain signs in by single sign-on at all;
//  2. an identity linked before signs in to its account;
//  3. otherwise, when an account has the same email (up to ASCII case) and
//     the provider says the email is verified, the identity is linked to
//     it — but only once the person proves the account is theirs with its
//     password (oidc_link.go): Weft does not verify the emails of
//     password sign-ups, so the account may be someone else's, made under
//     this address before its owner first came by single sign-on. An
//     account without a password of its own (made by single sign-on) or
//     already linked to another identity of this provider cannot be linked
//     here. An unverified email links nothing and creates nothing: whoever
//     typed it may not own it;
//  4. otherwise a new account is made, under the sign-up rules: the first
//     account is the admin (with the setup token when one was printed),
//     later ones join while sign-up is open, with a usable invite while it
//     is invite-only (the invite link's page starts the sign-in with it),
//     or at any time when their domain is listed in
//     WEFT_OIDC_ALLOWED_DOMAINS.
//
// A disabled account is refused.
func (s *ssoPages) account(r *http.Request, id ssoIdentity, f ssoFlow) (ssoOutcome, error) {
	ctx := r.Context()
	name := upperFirst(s.name())
	if len(s.cfg.AllowedDomains) > 0 && (!id.emailVerified || !s.domainAllowed(id.Email)) {
		return refuseSSO(http.StatusForbidden, fmt.Sprintf("Accounts of %s may not sign in to this server. Ask its administrator.",
			orSomething(emailDomain(id.Email), "that email domain")))
	}
	u, err := s.store.TouchIdentity(ctx, id.issuer, id.subject, id.Email)
	switch {
	case err == nil && u.Disabled:
		return refuseSSO(http.StatusForbidden, msgSSODisabled)
	case err == nil:
		return ssoOutcome{user: u}, nil
	case !errors.Is(err, db.ErrNotFound):
		return ssoOutcome{}, err
	}
	if addr, err := mail.ParseAddress(id.Email); err != nil || addr.Address != id.Email || len(id.Email) > 254 {
		return refuseSSO(http.StatusForbidden, fmt.Sprintf("%s did not give Weft an email address, which every account needs.", name))
	}
	if !id.emailVerified {
		return refuseSSO(http.StatusForbidden, fmt.Sprintf(
			"%s has not verified your email address, so Weft cannot use it. Verify it with %s, then sign in again.", name, s.name()))
	}
	u, err = s.auth.store.UserByEmail(ctx, id.Email)
	switch {
	case errors.Is(err, db.ErrNotFound):
		return s.create(r, id, db.Identity{Issuer: id.issuer, Subject: id.subject, Email: id.Email}, f)
	case err != nil:
		return ssoOutcome{}, err
	}
	if status, msg, err := s.linkable(ctx, u, id); err != nil || msg != "" {
		return ssoOutcome{status: status, msg: msg}, err
	}
	return ssoOutcome{user: u, link: true}, nil
}

// linkable says why the identity cannot be linked to u, the account with
// its email ("" when it can, with the account's password).
func (s *ssoPages) linkable(ctx context.Context, u db.User, id ssoIdentity) (int, string, error) {
	switch {
	case foldASCII(u.Email) != foldASCII(id.Email):
		// PostgreSQL's lower() matched letters that only look alike.
		return http.StatusConflict, "An account on this server has an email address that only looks like this one. Ask the server's administrator.", nil
	case u.Disabled:
		return http.StatusForbidden, msgSSODisabled, nil
	case !u.HasPassword:
		return http.StatusConflict, fmt.Sprintf("An account with this email already exists on Weft, but it has no password to confirm "+
			"that it is yours, so %s cannot be linked to it. Ask the server's administrator.", s.name()), nil
	}
	ids, err := s.store.Identities(ctx, u.ID)
	if err != nil {
		return 0, "", err
	}
	for _, other := range ids {
		if other.Issuer == id.issuer {
			return http.StatusConflict, fmt.Sprintf("The account with this email is linked to another %s account.", s.name()), nil
		}
	}
	return 0, "", nil
}

// create makes the account of a new identity. The cheap refusals come
// before the sign-up limit is counted and a password hash is made;
// CreateUserWithIdentity decides again under its lock.
func (s *ssoPages) create(r *http.Request, id ssoIdentity, link db.Identity, f ssoFlow) (ssoOutcome, error) {
	ctx := r.Context()
	byDomain := len(s.cfg.AllowedDomains) > 0 // rule 1 let only listed domains through
	n, err := s.auth.store.CountUsers(ctx)
	if err != nil {
		return ssoOutcome{}, err
	}
	if n > 0 && !byDomain {
		mode, err := s.auth.store.Setting(ctx, "signup_mode", db.SignupOpen)
		if err != nil {
			return ssoOutcome{}, err
		}
		switch {
		case mode == db.SignupInvite && f.Invite == "":
			return refuseSSO(http.StatusForbidden, msgInviteOnly)
		case mode == db.SignupInvite:
			if _, err := s.auth.store.CheckInvite(ctx, f.Invite, id.Email); inviteMessage(err) != "" {
				return refuseSSO(inviteStatus(err), inviteMessage(err))
			} else if err != nil {
				return ssoOutcome{}, err
			}
		case mode != db.SignupOpen:
			return refuseSSO(http.StatusForbidden, msgSignupClosed)
		}
	}
	if s.auth.signupLimit > 0 {
		err := s.auth.store.ReserveSignup(ctx, clientIP(r), s.auth.signupLimit, time.Now().Add(-time.Hour))
		if errors.Is(err, db.ErrRateLimited) {
			return refuseSSO(http.StatusTooManyRequests, msgSignupLimited)
		}
		if err != nil {
			return ssoOutcome{}, err
		}
	}
	// No password anyone knows: the account signs in through its provider.
	hash, err := s.auth.hashes.hash(ctx, rand.Text()+rand.Text())
	if err != nil {
		return ssoOutcome{}, err
	}
	u, ws, err := s.store.CreateUserWithIdentity(ctx, db.NewIdentityUser{Identity: link, DisplayName: ssoDisplayName(id),
		PasswordHash: hash, SetupToken: f.SetupToken, Invite: f.Invite, IgnoreSignupMode: byDomain})
	switch {
	case errors.Is(err, db.ErrSignupClosed):
		return refuseSSO(http.StatusForbidden, msgSignupClosed)
	case inviteMessage(err) != "":
		return refuseSSO(inviteStatus(err), inviteMessage(err))
	case errors.Is(err, db.ErrSetupToken):
		return refuseSSO(http.StatusForbidden,
			"The first account needs the setup token printed in the server's log at start-up: enter it on the sign-in page, then sign in again.")
	case errors.Is(err, db.ErrConflict):
		return refuseSSO(http.StatusConflict, "An account with this email was created at the same moment. Sign in again.")
	case err != nil:
		return ssoOutcome{}, err
	}
	slog.InfoContext(ctx, "account created by single sign-on", "user", u.ID, "role", u.Role, "issuer", id.issuer)
	return ssoOutcome{user: u, workspace: ws.ID}, nil
}

func (s *ssoPages) domainAllowed(email string) bool {
	d := emailDomain(email)
	return d != "" && slices.Contains(s.cfg.AllowedDomains, d)
}

// emailDomain is the lower-case domain of an address ("" when none).
func emailDomain(email string) string {
	i := strings.LastIndexByte(email, '@')
	if i < 0 {
		return ""
	}
	return foldASCII(email[i+1:])
}

// foldASCII lower-cases the ASCII letters only. Emails from a provider are
// compared this way: Unicode case mapping (strings.ToLower, PostgreSQL's
// lower()) turns some other letters into ASCII ones — the Kelvin sign "K"
// into "k", "İ" into "i" — so an address at a look-alike domain, which
// anyone may register and have verified, would pass for another's.
func foldASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

func orSomething(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ssoDisplayName is the provider's name for the person, or its user name,
// or the email's local part, at most 100 characters, without control
// characters (PostgreSQL refuses a NUL in text).
func ssoDisplayName(id ssoIdentity) string {
	name := strings.TrimSpace(strings.Map(dropControl, id.Name))
	if name == "" {
		name = strings.TrimSpace(strings.Map(dropControl, id.Username))
	}
	if name == "" || !utf8.ValidString(name) {
		name = displayNameFrom(id.Email)
	}
	if utf8.RuneCountInString(name) > 100 {
		name = string([]rune(name)[:100])
	}
	return name
}

func dropControl(r rune) rune {
	if unicode.IsControl(r) {
		return -1
	}
	return r
}
