package handlers

import (
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

// account decides which account a verified identity signs in to:
//
//  1. with WEFT_OIDC_ALLOWED_DOMAINS, only a verified email of a listed
//     domain signs in by single sign-on at all;
//  2. an identity linked before signs in to its account;
//  3. otherwise the account with the same email (up to ASCII case) is
//     linked, but only when the provider says the email is verified (an
//     unverified email links nothing and creates nothing: whoever typed it
//     may not own it);
//  4. otherwise a new account is made, under the sign-up rules: the first
//     account is the admin (with the setup token when one was printed),
//     later ones join while sign-up is open, with a usable invite while it
//     is invite-only (the invite link's page starts the sign-in with it),
//     or at any time when their domain is listed in
//     WEFT_OIDC_ALLOWED_DOMAINS.
//
// A disabled account is refused. A non-empty message refuses with status;
// the workspace is the new account's (0 otherwise).
func (s *ssoPages) account(r *http.Request, id ssoIdentity, f ssoFlow) (db.User, int64, int, string, error) {
	ctx := r.Context()
	refuse := func(status int, msg string) (db.User, int64, int, string, error) {
		return db.User{}, 0, status, msg, nil
	}
	name := upperFirst(s.name())
	if len(s.cfg.AllowedDomains) > 0 && (!id.emailVerified || !s.domainAllowed(id.Email)) {
		return refuse(http.StatusForbidden, fmt.Sprintf("Accounts of %s may not sign in to this server. Ask its administrator.",
			orSomething(emailDomain(id.Email), "that email domain")))
	}
	msgDisabled := "This account is disabled. Ask the server's administrator."
	u, err := s.store.TouchIdentity(ctx, id.issuer, id.subject, id.Email)
	switch {
	case err == nil && u.Disabled:
		return refuse(http.StatusForbidden, msgDisabled)
	case err == nil:
		return u, 0, 0, "", nil
	case !errors.Is(err, db.ErrNotFound):
		return db.User{}, 0, 0, "", err
	}
	if addr, err := mail.ParseAddress(id.Email); err != nil || addr.Address != id.Email || len(id.Email) > 254 {
		return refuse(http.StatusForbidden, fmt.Sprintf("%s did not give Weft an email address, which every account needs.", name))
	}
	if !id.emailVerified {
		return refuse(http.StatusForbidden, fmt.Sprintf(
			"%s has not verified your email address, so Weft cannot use it. Verify it with %s, then sign in again.", name, s.name()))
	}
	link := db.Identity{Issuer: id.issuer, Subject: id.subject, Email: id.Email}
	u, err = s.auth.store.UserByEmail(ctx, id.Email)
	switch {
	case err == nil && foldASCII(u.Email) != foldASCII(id.Email):
		// PostgreSQL's lower() matched letters that only look alike.
		return refuse(http.StatusConflict, "An account on this server has an email address that only looks like this one. Ask the server's administrator.")
	case err == nil && u.Disabled:
		return refuse(http.StatusForbidden, msgDisabled)
	case err == nil:
		switch err := s.store.LinkIdentity(ctx, u.ID, link); {
		case errors.Is(err, db.ErrOtherIdentity):
			return refuse(http.StatusConflict, fmt.Sprintf("The account with this email is linked to another %s account.", s.name()))
		case errors.Is(err, db.ErrConflict): // the same sign-in, finished twice at once
			return refuse(http.StatusConflict, "This sign-in was already used. Start again from the sign-in page.")
		case err != nil:
			return db.User{}, 0, 0, "", err
		}
		slog.InfoContext(ctx, "single sign-on linked to an existing account", "user", u.ID, "issuer", id.issuer)
		return u, 0, 0, "", nil
	case !errors.Is(err, db.ErrNotFound):
		return db.User{}, 0, 0, "", err
	}
	return s.create(r, id, link, f)
}

// create makes the account of a new identity. The cheap refusals come
// before the sign-up limit is counted and a password hash is made;
// CreateUserWithIdentity decides again under its lock.
func (s *ssoPages) create(r *http.Request, id ssoIdentity, link db.Identity, f ssoFlow) (db.User, int64, int, string, error) {
	ctx := r.Context()
	byDomain := len(s.cfg.AllowedDomains) > 0 // rule 1 let only listed domains through
	n, err := s.auth.store.CountUsers(ctx)
	if err != nil {
		return db.User{}, 0, 0, "", err
	}
	if n > 0 && !byDomain {
		mode, err := s.auth.store.Setting(ctx, "signup_mode", db.SignupOpen)
		if err != nil {
			return db.User{}, 0, 0, "", err
		}
		switch {
		case mode == db.SignupInvite && f.Invite == "":
			return db.User{}, 0, http.StatusForbidden, msgInviteOnly, nil
		case mode == db.SignupInvite:
			if _, err := s.auth.store.CheckInvite(ctx, f.Invite, id.Email); inviteMessage(err) != "" {
				return db.User{}, 0, inviteStatus(err), inviteMessage(err), nil
			} else if err != nil {
				return db.User{}, 0, 0, "", err
			}
		case mode != db.SignupOpen:
			return db.User{}, 0, http.StatusForbidden, msgSignupClosed, nil
		}
	}
	if s.auth.signupLimit > 0 {
		err := s.auth.store.ReserveSignup(ctx, clientIP(r), s.auth.signupLimit, time.Now().Add(-time.Hour))
		if errors.Is(err, db.ErrRateLimited) {
			return db.User{}, 0, http.StatusTooManyRequests, msgSignupLimited, nil
		}
		if err != nil {
			return db.User{}, 0, 0, "", err
		}
	}
	// No password anyone knows: the account signs in through its provider.
	hash, err := s.auth.hashes.hash(ctx, rand.Text()+rand.Text())
	if err != nil {
		return db.User{}, 0, 0, "", err
	}
	u, ws, err := s.store.CreateUserWithIdentity(ctx, db.NewIdentityUser{Identity: link, DisplayName: ssoDisplayName(id),
		PasswordHash: hash, SetupToken: f.SetupToken, Invite: f.Invite, IgnoreSignupMode: byDomain})
	switch {
	case errors.Is(err, db.ErrSignupClosed):
		return db.User{}, 0, http.StatusForbidden, msgSignupClosed, nil
	case inviteMessage(err) != "":
		return db.User{}, 0, inviteStatus(err), inviteMessage(err), nil
	case errors.Is(err, db.ErrSetupToken):
		return db.User{}, 0, http.StatusForbidden,
			"The first account needs the setup token printed in the server's log at start-up: enter it on the sign-in page, then sign in again.", nil
	case errors.Is(err, db.ErrConflict):
		return db.User{}, 0, http.StatusConflict, "An account with this email was created at the same moment. Sign in again.", nil
	case err != nil:
		return db.User{}, 0, 0, "", err
	}
	slog.InfoContext(ctx, "account created by single sign-on", "user", u.ID, "role", u.Role, "issuer", id.issuer)
	return u, ws.ID, 0, "", nil
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
