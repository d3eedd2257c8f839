package views

import "context"

// SSO is single sign-on as the sign-in and sign-up pages show it. The
// handlers put it in the request's context for those pages only, so that
// every way they are drawn (a refusal, a fresh page) shows the same button.
type SSO struct {
	Name        string // "Sign in with <Name>"
	Only        bool   // no password form
	Unreachable bool   // the provider's discovery failed last time
	// NeedsSetupToken: no account exists and the first one needs the
	// token from the log, so the button's form asks for it.
	NeedsSetupToken bool
}

type ssoKey struct{}

// WithSSO returns ctx carrying the sign-in pages' single sign-on.
func WithSSO(ctx context.Context, s SSO) context.Context {
	return context.WithValue(ctx, ssoKey{}, s)
}

// ssoFrom returns the single sign-on of the page being drawn, if any.
func ssoFrom(ctx context.Context) (SSO, bool) {
	s, ok := ctx.Value(ssoKey{}).(SSO)
	return s, ok
}
