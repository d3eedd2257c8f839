package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDCConfig is single sign-on with an OpenID Connect provider
// (WEFT_OIDC_*). A nil *OIDCConfig in Config is no single sign-on.
type OIDCConfig struct {
	Issuer       string // WEFT_OIDC_ISSUER, exactly as the provider's discovery document names itself
	ClientID     string
	ClientSecret string // empty for a public client (PKCE alone)
	// RedirectURL is where the provider sends the browser back; by default
	// WEFT_PUBLIC_URL + /auth/oidc/callback (register it at the provider).
	RedirectURL string
	Scopes      []string // "openid" is always asked for; default openid email profile
	// AllowedDomains (WEFT_OIDC_ALLOWED_DOMAINS, lower case): when set, only
	// verified emails of these domains sign in by single sign-on, and they
	// may create accounts even while sign-up is closed.
	AllowedDomains []string
	Only           bool // WEFT_OIDC_ONLY: no password sign-in or sign-up
	// TrustEmail (WEFT_OIDC_TRUST_EMAIL) takes every email the provider
	// gives as verified: for a provider that sends no email_verified but
	// whose emails only its administrators set (Microsoft Entra ID).
	TrustEmail bool
	Name       string // the button's "Sign in with <Name>"; default "single sign-on"
	// Timeout bounds each call to the provider (discovery, the code
	// exchange, its keys). Default 10 s.
	Timeout time.Duration
	// RetryWait is the least time between two discoveries after one
	// failed. Default 5 s.
	RetryWait time.Duration
}

// errSSOUnreachable is returned while the provider's discovery fails.
var errSSOUnreachable = errors.New("single sign-on provider not reachable")

// ssoProvider is the provider as discovered: discovery runs at start-up
// (bounded by the timeout) and, while it fails, again when someone looks
// at the sign-in page or signs in — never more often than RetryWait. Weft
// starts and serves passwords while the provider is down.
type ssoProvider struct {
	cfg    OIDCConfig
	client *http.Client // every call to the provider, with the timeout

	mu       sync.Mutex // held during a discovery: callers queue behind it
	ready    *ssoReady
	failedAt time.Time
	// down mirrors "the last discovery failed" for the sign-in page, which
	// must not wait on the mutex; retrying is set while one runs in the
	// background.
	down, retrying atomic.Bool
	// authOrigin is the authorization endpoint's origin once discovered
	// (a string), for the sign-in pages' form-action.
	authOrigin atomic.Value
}

// ssoReady is what a successful discovery gives.
type ssoReady struct {
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
}

func newSSOProvider(cfg OIDCConfig) *ssoProvider {
	return &ssoProvider{cfg: cfg, client: &http.Client{Timeout: cfg.Timeout}}
}

// ctx carries the provider's HTTP client to go-oidc and oauth2.
func (s *ssoProvider) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(context.WithValue(ctx, oauth2.HTTPClient, s.client), s.client)
}

// get returns the discovered provider, discovering it now if needed.
func (s *ssoProvider) get(ctx context.Context) (*ssoReady, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready != nil {
		return s.ready, nil
	}
	if !s.failedAt.IsZero() && time.Since(s.failedAt) < s.cfg.RetryWait {
		return nil, errSSOUnreachable
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	p, err := oidc.NewProvider(s.ctx(ctx), s.cfg.Issuer)
	if err != nil {
		s.failedAt = time.Now()
		s.down.Store(true)
		return nil, fmt.Errorf("%w: discovery of %s: %w", errSSOUnreachable, s.cfg.Issuer, err)
	}
	scopes := []string{oidc.ScopeOpenID}
	for _, sc := range s.cfg.Scopes {
		if sc != oidc.ScopeOpenID {
			scopes = append(scopes, sc)
		}
	}
	s.ready = &ssoReady{
		oauth: oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Endpoint: p.Endpoint(),
			RedirectURL: s.cfg.RedirectURL, Scopes: scopes},
		// Signature, issuer, audience (our client id) and expiry; the
		// nonce is ours to compare.
		verifier: p.Verifier(&oidc.Config{ClientID: s.cfg.ClientID}),
	}
	if o := origin(p.Endpoint().AuthURL); o != "" {
		s.authOrigin.Store(o)
	}
	s.down.Store(false)
	return s.ready, nil
}

// DiscoverSSO looks the single sign-on provider up, at start-up. It is
// bounded by the provider timeout and never fails: while the provider is
// down Weft serves passwords and says so on the sign-in page.
func (s *Server) DiscoverSSO(ctx context.Context) {
	if s.sso.provider != nil {
		s.sso.provider.discover(ctx)
	}
}

// discover is the start-up attempt: it logs, and never fails start-up.
func (s *ssoProvider) discover(ctx context.Context) {
	if _, err := s.get(ctx); err != nil {
		slog.Warn("single sign-on is not reachable: Weft starts without it and retries when someone signs in",
			"issuer", s.cfg.Issuer, "err", err)
		return
	}
	slog.Info("single sign-on ready", "issuer", s.cfg.Issuer)
}

// unreachable tells the sign-in page whether the last discovery failed,
// without waiting; when it did, one retry starts in the background (it
// is bounded by the timeout, and throttled by RetryWait in get).
func (s *ssoProvider) unreachable() bool {
	if !s.down.Load() {
		return false
	}
	if s.retrying.CompareAndSwap(false, true) {
		go func() {
			defer s.retrying.Store(false)
			_, _ = s.get(context.Background())
		}()
	}
	return true
}

// withDefaults fills what the deployment left unset; nil stays nil.
func (c *OIDCConfig) withDefaults(public *url.URL) *OIDCConfig {
	if c == nil {
		return nil
	}
	cp := *c
	if cp.RedirectURL == "" && public != nil {
		cp.RedirectURL = strings.TrimSuffix(public.String(), "/") + "/auth/oidc/callback"
	}
	if len(cp.Scopes) == 0 {
		cp.Scopes = []string{"email", "profile"}
	}
	if cp.Name == "" {
		cp.Name = "SSO"
	}
	if cp.Timeout <= 0 {
		cp.Timeout = 10 * time.Second
	}
	if cp.RetryWait == 0 {
		cp.RetryWait = 5 * time.Second
	}
	return &cp
}

// formAction is the sign-in pages' CSP form-action: 'self' and the
// provider. The button is a form (it may carry the setup token), and
// browsers check form-action on every redirect a form submission follows,
// so 'self' alone stops the redirect to the provider.
func (s *ssoProvider) formAction() string {
	srcs := []string{"'self'"}
	if o := origin(s.cfg.Issuer); o != "" {
		srcs = append(srcs, o)
	}
	if o, _ := s.authOrigin.Load().(string); o != "" && !slices.Contains(srcs, o) {
		srcs = append(srcs, o)
	}
	return "form-action " + strings.Join(srcs, " ")
}

// origin is scheme://host[:port] of an http(s) URL, "" for anything that
// could not stand as a CSP source.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(u.Host, " ;,'\"*") {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
