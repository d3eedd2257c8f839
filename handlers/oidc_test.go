package handlers_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
	"golang.org/x/crypto/argon2"

	"weft/db"
	"weft/handlers"
	"weft/internal/testenv"
)

// ssoEnv is Weft with single sign-on against an in-process mock provider
// (mockoidc), which a middleware records and can tamper with.
type ssoEnv struct {
	t     *testing.T
	store *db.DB
	idp   *mockoidc.MockOIDC
	app   *testenv.App
	base  string

	mu        sync.Mutex
	authorize []url.Values // the authorization requests' parameters
	tokens    []url.Values // the token requests' forms

	down         atomic.Bool  // discovery answers 503
	dropVerifier atomic.Bool  // token requests lose their code_verifier
	nonce        atomic.Value // a string: authorization requests' nonce replaced
	exchanges    atomic.Int64 // token requests seen
}

func startSSO(t *testing.T, tune func(*handlers.Config), before ...func(*ssoEnv)) *ssoEnv {
	t.Helper()
	e := &ssoEnv{t: t, store: testenv.NewDB(t)}
	e.nonce.Store("")
	idp, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	e.idp = idp
	if err := idp.AddMiddleware(e.tamper); err != nil {
		t.Fatal(err)
	}
	idpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := idp.Start(idpLn, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idp.Shutdown() })
	for _, f := range before {
		f(e)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.base = "http://" + ln.Addr().String()
	public, _ := url.Parse(e.base)
	cfg := handlers.Config{PublicURL: public, OIDC: &handlers.OIDCConfig{Issuer: idp.Issuer(), ClientID: idp.ClientID,
		ClientSecret: idp.ClientSecret, Name: "MockID", RetryWait: time.Nanosecond}}
	if tune != nil {
		tune(&cfg)
	}
	e.app = testenv.Start(t, e.store, testenv.Options{HTTP: cfg, Listener: ln})
	return e
}

func (e *ssoEnv) tamper(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case mockoidc.DiscoveryEndpoint:
			if e.down.Load() {
				http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
				return
			}
		case mockoidc.AuthorizationEndpoint:
			q := r.URL.Query()
			e.mu.Lock()
			e.authorize = append(e.authorize, q)
			e.mu.Unlock()
			if n := e.nonce.Load().(string); n != "" {
				q.Set("nonce", n)
				r.URL.RawQuery = q.Encode()
			}
		case mockoidc.TokenEndpoint:
			if err := r.ParseForm(); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			e.exchanges.Add(1)
			e.mu.Lock()
			e.tokens = append(e.tokens, r.PostForm)
			e.mu.Unlock()
			if e.dropVerifier.Load() {
				r.Form.Del("code_verifier")
				r.PostForm.Del("code_verifier")
			}
		}
		next.ServeHTTP(w, r)
	})
}

// user queues the identity the provider signs in next.
func (e *ssoEnv) user(subject, email string, verified bool) {
	e.idp.QueueUser(&mockoidc.MockUser{Subject: subject, Email: email, EmailVerified: verified, PreferredUsername: subject})
}

// browser is a person's browser: it follows redirects and keeps cookies.
func (e *ssoEnv) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second}
}

// signIn clicks "Sign in with MockID" and follows the redirects through the
// provider and back; it returns where the browser ended and the page.
func (e *ssoEnv) signIn(b *http.Client, form url.Values) (*http.Response, string) {
	e.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	resp, err := b.PostForm(e.base+"/auth/oidc/login", form)
	if err != nil {
		e.t.Fatalf("sign in: %v", err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, sb.String()
}

// signedIn asserts the browser ended on the home page, signed in as email.
func (e *ssoEnv) signedIn(b *http.Client, email string) db.User {
	e.t.Helper()
	resp, body := e.signIn(b, nil)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" || !strings.Contains(body, `data-testid="composer"`) {
		e.t.Fatalf("single sign-on of %s ended at %s with %d: %.500s", email, resp.Request.URL, resp.StatusCode, body)
	}
	u, err := e.store.UserByEmail(context.Background(), email)
	if err != nil {
		e.t.Fatalf("the account of %s: %v", email, err)
	}
	return u
}

// refused asserts the sign-in ended on an error page with status and a
// message containing want, signed in as nobody.
func (e *ssoEnv) refused(b *http.Client, status int, want string) {
	e.t.Helper()
	resp, body := e.signIn(b, nil)
	if resp.StatusCode != status || !strings.Contains(body, want) {
		e.t.Fatalf("sign-in = %d at %s, want %d saying %q: %.600s", resp.StatusCode, resp.Request.URL, status, want, body)
	}
	if strings.Contains(body, "eyJ") || strings.Contains(body, "code=") {
		e.t.Errorf("the error page shows a token or code: %.600s", body)
	}
	e.anonymous(b)
}

// anonymous asserts the browser is not signed in.
func (e *ssoEnv) anonymous(b *http.Client) {
	e.t.Helper()
	b2 := *b
	b2.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := b2.Get(e.base + "/")
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		e.t.Fatalf("after a refused sign-in / = %d %q, want the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func (e *ssoEnv) users() int {
	e.t.Helper()
	n, err := e.store.CountUsers(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *ssoEnv) identities(user int64) []db.Identity {
	e.t.Helper()
	ids, err := e.store.Identities(context.Background(), user)
	if err != nil {
		e.t.Fatal(err)
	}
	return ids
}

func TestSingleSignOnCreatesAnAccountAndTheSameSubjectReturnsToIt(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	owner := testenv.NewClient(t, e.base)
	owner.Register("owner@example.com", password) // the first account, by password

	e.user("sub-ada", "ada@example.com", true)
	ada := e.signedIn(e.browser(), "ada@example.com")
	if ada.Role != "member" || ada.DisplayName != "sub-ada" || ada.Disabled {
		t.Errorf("the new account: %+v", ada)
	}
	if ids := e.identities(ada.ID); len(ids) != 1 || ids[0].Issuer != e.idp.Issuer() || ids[0].Subject != "sub-ada" {
		t.Errorf("its identity: %+v", ids)
	}
	// No password signs in to it.
	c := testenv.NewClient(t, e.base)
	for _, pw := range []string{"", password, ada.PasswordHash} {
		if r := c.Post("/login", url.Values{"email": {"ada@example.com"}, "password": {pw}}); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("password sign-in of an account made by single sign-on = %d", r.StatusCode)
		}
	}

	// The same subject, even with another email now, is the same account.
	e.user("sub-ada", "ada.lovelace@example.com", true)
	b := e.browser()
	resp, body := e.signIn(b, nil)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
		t.Fatalf("second sign-in = %d at %s: %.300s", resp.StatusCode, resp.Request.URL, body)
	}
	if n := e.users(); n != 2 {
		t.Errorf("%d accounts after the second sign-in, want 2", n)
	}
	if ids := e.identities(ada.ID); len(ids) != 1 || ids[0].Email != "ada.lovelace@example.com" {
		t.Errorf("the identity after the second sign-in: %+v", ids)
	}
	if !strings.Contains(body, "sub-ada") && !strings.Contains(body, "ada@example.com") {
		t.Errorf("the home page does not show who is signed in: %.500s", body)
	}
}

// A verified email of an existing password account links the identity to
// it only with the account's password (see oidc_link_test.go for the rest).
func TestSingleSignOnLinksAVerifiedEmailToTheExistingAccountWithItsPassword(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	bob := testenv.NewClient(t, e.base)
	bob.Register("bob@example.com", password)
	before, err := e.store.UserByEmail(context.Background(), "bob@example.com")
	if err != nil {
		t.Fatal(err)
	}
	e.user("sub-bob", "Bob@Example.com", true)
	if u := e.linkedIn(e.browser(), "bob@example.com", password); u.ID != before.ID {
		t.Fatalf("signed in to account %d, want bob's %d", u.ID, before.ID)
	}
	if ids := e.identities(before.ID); len(ids) != 1 || ids[0].Subject != "sub-bob" {
		t.Errorf("bob's identities: %+v", ids)
	}
	if n := e.users(); n != 1 {
		t.Errorf("%d accounts, want bob's alone", n)
	}
	// His password still works; the linked identity now signs in at once.
	testenv.NewClient(t, e.base).Login("bob@example.com", password)
	e.user("sub-bob", "bob@example.com", true)
	e.signedIn(e.browser(), "bob@example.com")
	// Another subject of the same provider cannot take the linked account,
	// and is not even asked for its password.
	e.user("sub-mallory", "bob@example.com", true)
	e.refused(e.browser(), http.StatusConflict, "linked to another MockID account")
}

func TestSingleSignOnNeverLinksOrCreatesAnAccountForAnUnverifiedEmail(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	bob := testenv.NewClient(t, e.base)
	bob.Register("bob@example.com", password)
	u, _ := e.store.UserByEmail(context.Background(), "bob@example.com")

	e.user("sub-mallory", "bob@example.com", false)
	e.refused(e.browser(), http.StatusForbidden, "MockID has not verified your email address")
	if ids := e.identities(u.ID); len(ids) != 0 {
		t.Errorf("an unverified email was linked: %+v", ids)
	}
	e.user("sub-eve", "eve@example.com", false)
	e.refused(e.browser(), http.StatusForbidden, "has not verified your email address")
	if n := e.users(); n != 1 {
		t.Errorf("%d accounts: an unverified email made one", n)
	}
	// No email at all (the email scope not granted) is refused too.
	e.user("sub-nobody", "", true)
	e.refused(e.browser(), http.StatusForbidden, "did not give Weft an email address")
}

func TestSingleSignOnAdmitsOnlyTheAllowedDomainsEvenWhileSignUpIsClosed(t *testing.T) {
	t.Parallel()
	e := startSSO(t, func(c *handlers.Config) { c.OIDC.AllowedDomains = []string{"example.com"} })
	admin := testenv.NewClient(t, e.base)
	admin.Register("admin@example.com", password)
	if r := admin.Post("/admin/signup", url.Values{"mode": {"closed"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("close sign-up = %d", r.StatusCode)
	}
	e.user("sub-x", "x@evil.test", true)
	e.refused(e.browser(), http.StatusForbidden, "Accounts of evil.test may not sign in")
	// A listed domain's address must be verified to count.
	e.user("sub-y", "y@example.com", false)
	e.refused(e.browser(), http.StatusForbidden, "may not sign in")
	if n := e.users(); n != 1 {
		t.Fatalf("%d accounts after refusals", n)
	}
	// The administrator's allowance: a listed domain joins though sign-up is closed.
	e.user("sub-z", "z@EXAMPLE.com", true)
	if u := e.signedIn(e.browser(), "z@example.com"); u.Role != "member" {
		t.Errorf("the new account: %+v", u)
	}
}

func TestSingleSignOnFollowsTheSignUpModeWithoutAllowedDomains(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	admin := testenv.NewClient(t, e.base)
	admin.Register("admin@example.com", password)
	if r := admin.Post("/admin/signup", url.Values{"mode": {"closed"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("close sign-up = %d", r.StatusCode)
	}
	e.user("sub-new", "new@example.com", true)
	e.refused(e.browser(), http.StatusForbidden, "Sign-up is closed")
	// An existing account still links (with its password) and signs in.
	e.user("sub-admin", "admin@example.com", true)
	e.linkedIn(e.browser(), "admin@example.com", password)
}

func TestSingleSignOnRefusesADisabledAccount(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	testenv.NewClient(t, e.base).Register("owner@example.com", password)
	e.user("sub-carol", "carol@example.com", true)
	carol := e.signedIn(e.browser(), "carol@example.com")
	if _, err := e.store.Pool.Exec(context.Background(), "UPDATE users SET disabled = true WHERE id = $1", carol.ID); err != nil {
		t.Fatal(err)
	}
	e.user("sub-carol", "carol@example.com", true)
	e.refused(e.browser(), http.StatusForbidden, "This account is disabled")
	// Nor does a disabled password account get linked.
	testenv.NewClient(t, e.base).Register("dan@example.com", password)
	if _, err := e.store.Pool.Exec(context.Background(), "UPDATE users SET disabled = true WHERE email = 'dan@example.com'"); err != nil {
		t.Fatal(err)
	}
	e.user("sub-dan", "dan@example.com", true)
	e.refused(e.browser(), http.StatusForbidden, "This account is disabled")
}

// flow walks a sign-in by hand up to the provider's redirect back to Weft
// and returns that callback URL (with the code and state).
func (e *ssoEnv) flow(c *testenv.Client) *url.URL {
	e.t.Helper()
	r := c.Get("/auth/oidc/login")
	if r.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("start = %d: %.300s", r.StatusCode, r.Body)
	}
	req, _ := http.NewRequest(http.MethodGet, r.Header.Get("Location"), nil)
	back := c.Send(req)
	if back.StatusCode != http.StatusFound {
		e.t.Fatalf("the provider = %d: %.300s", back.StatusCode, back.Body)
	}
	u, err := url.Parse(back.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(u.String(), e.base+"/auth/oidc/callback?") {
		e.t.Fatalf("the provider sent the browser to %q", back.Header.Get("Location"))
	}
	return u
}

func TestSingleSignOnRefusesAMissingOrForeignState(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	c := testenv.NewClient(t, e.base)
	callback := func(u *url.URL, change func(q url.Values)) testenv.Response {
		q := u.Query()
		change(q)
		return c.Get("/auth/oidc/callback?" + q.Encode())
	}

	e.user("sub-a", "a@example.com", true)
	u := e.flow(c)
	if r := callback(u, func(q url.Values) { q.Set("state", "forged") }); r.StatusCode != http.StatusBadRequest ||
		!strings.Contains(r.Body, "does not match the one this browser started") {
		t.Errorf("a foreign state = %d: %.300s", r.StatusCode, r.Body)
	}
	// The sign-in is used up: even the right state now fails.
	if r := callback(u, func(url.Values) {}); r.StatusCode != http.StatusBadRequest || !strings.Contains(r.Body, "expired") {
		t.Errorf("the right state after a foreign one = %d: %.300s", r.StatusCode, r.Body)
	}
	e.user("sub-a", "a@example.com", true)
	u = e.flow(c)
	if r := callback(u, func(q url.Values) { q.Del("state") }); r.StatusCode != http.StatusBadRequest {
		t.Errorf("no state = %d: %.300s", r.StatusCode, r.Body)
	}
	// A callback this browser never started (a link from another site).
	e.user("sub-a", "a@example.com", true)
	u = e.flow(testenv.NewClient(t, e.base))
	if r := callback(u, func(url.Values) {}); r.StatusCode != http.StatusBadRequest || !strings.Contains(r.Body, "expired") {
		t.Errorf("another browser's callback = %d: %.300s", r.StatusCode, r.Body)
	}
	if n := e.users(); n != 0 {
		t.Errorf("%d accounts made by refused callbacks", n)
	}
	if n := e.exchanges.Load(); n != 0 {
		t.Errorf("%d codes exchanged for refused callbacks", n)
	}
	// The provider's refusal (the person cancelled) is an error page too.
	e.user("sub-a", "a@example.com", true)
	u = e.flow(c)
	if r := callback(u, func(q url.Values) { q.Del("code"); q.Set("error", "access_denied") }); r.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(r.Body, "MockID did not sign you in") {
		t.Errorf("the provider's refusal = %d: %.300s", r.StatusCode, r.Body)
	}
	// And the right callback signs in, under a new session token (the one
	// that carried the sign-in in progress is not the signed-in one).
	e.user("sub-a", "a@example.com", true)
	u = e.flow(c)
	before := c.SessionCookie()
	if r := callback(u, func(url.Values) {}); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/" {
		t.Errorf("the right callback = %d %q: %.300s", r.StatusCode, r.Header.Get("Location"), r.Body)
	}
	if after := c.SessionCookie(); before == "" || after == "" || after == before {
		t.Errorf("session token before %q and after signing in %q: not renewed", before, after)
	}
}

func TestSingleSignOnSendsThePKCEVerifierTheProviderChecks(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	e.user("sub-p", "p@example.com", true)
	e.signedIn(e.browser(), "p@example.com")
	e.mu.Lock()
	auth, tokens := e.authorize[len(e.authorize)-1], e.tokens
	e.mu.Unlock()
	if auth.Get("code_challenge_method") != "S256" || auth.Get("code_challenge") == "" || auth.Get("nonce") == "" || auth.Get("state") == "" ||
		auth.Get("redirect_uri") != e.base+"/auth/oidc/callback" || auth.Get("scope") != "openid email profile" {
		t.Fatalf("the authorization request: %v", auth)
	}
	var verifier string
	for _, f := range tokens {
		if v := f.Get("code_verifier"); v != "" {
			verifier = v
		}
	}
	sum := sha256.Sum256([]byte(verifier))
	if verifier == "" || base64.RawURLEncoding.EncodeToString(sum[:]) != auth.Get("code_challenge") {
		t.Fatalf("the token request's verifier %q does not answer the challenge %q", verifier, auth.Get("code_challenge"))
	}
	// Without the verifier the provider refuses the code, and nobody is signed in.
	e.dropVerifier.Store(true)
	e.user("sub-q", "q@example.com", true)
	e.refused(e.browser(), http.StatusBadGateway, "could not be completed")
	if _, err := e.store.UserByEmail(context.Background(), "q@example.com"); err == nil {
		t.Error("an account was made without a verified code")
	}
}

func TestSingleSignOnRefusesAnIDTokenWithAnotherNonce(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	e.nonce.Store("a-nonce-from-another-sign-in")
	e.user("sub-n", "n@example.com", true)
	e.refused(e.browser(), http.StatusUnauthorized, "could not be completed")
	if n := e.users(); n != 0 {
		t.Errorf("%d accounts made with a foreign nonce", n)
	}
	e.nonce.Store("")
	e.user("sub-n", "n@example.com", true)
	e.signedIn(e.browser(), "n@example.com")
}

func TestTheFirstAccountBySingleSignOnIsTheAdminAndNeedsTheSetupToken(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	token, err := handlers.IssueSetupToken(context.Background(), e.store)
	if err != nil || token == "" {
		t.Fatalf("issue a setup token: %q %v", token, err)
	}
	login := testenv.NewClient(t, e.base).Get("/login")
	if !strings.Contains(login.Body, `data-testid="sso-setup-token"`) {
		t.Errorf("the sign-in page does not ask for the setup token: %.800s", login.Body)
	}
	e.user("sub-root", "root@example.com", true)
	e.refused(e.browser(), http.StatusForbidden, "setup token")
	if resp, body := e.signIn(e.browser(), url.Values{"setup_token": {"wrong"}}); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(body, "setup token") {
		t.Errorf("a wrong setup token = %d: %.300s", resp.StatusCode, body)
	}
	if n := e.users(); n != 0 {
		t.Fatalf("%d accounts without the setup token", n)
	}
	e.user("sub-root", "root@example.com", true)
	b := e.browser()
	resp, body := e.signIn(b, url.Values{"setup_token": {token}})
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
		t.Fatalf("with the setup token = %d at %s: %.300s", resp.StatusCode, resp.Request.URL, body)
	}
	if u, err := e.store.UserByEmail(context.Background(), "root@example.com"); err != nil || u.Role != "admin" {
		t.Fatalf("the first account: %+v %v", u, err)
	}
	if r, err := b.Get(e.base + "/admin"); err != nil || r.StatusCode != http.StatusOK {
		t.Errorf("the first account opens /admin: %v %v", r, err)
	}
}

func TestWithSingleSignOnOnlyThePasswordFormIsGoneAndPasswordsAreRefused(t *testing.T) {
	t.Parallel()
	e := startSSO(t, func(c *handlers.Config) { c.OIDC.Only = true })
	// An account from before OIDC-only was switched on.
	if _, _, err := e.store.CreateUser(context.Background(), "old@example.com", "old", mustHash(t)); err != nil {
		t.Fatal(err)
	}
	c := testenv.NewClient(t, e.base)
	for _, path := range []string{"/login", "/register"} {
		r := c.Get(path)
		if r.StatusCode != http.StatusOK || strings.Contains(r.Body, `type="password"`) || !strings.Contains(r.Body, "Sign in with MockID") {
			t.Errorf("%s with OIDC only = %d: %.800s", path, r.StatusCode, r.Body)
		}
	}
	if r := c.Post("/login", url.Values{"email": {"old@example.com"}, "password": {password}}); r.StatusCode != http.StatusForbidden ||
		!strings.Contains(r.Body, "Password sign-in is off") || strings.Contains(r.Body, `type="password"`) {
		t.Errorf("password sign-in with OIDC only = %d: %.500s", r.StatusCode, r.Body)
	}
	if r := c.Post("/register", url.Values{"email": {"new@example.com"}, "password": {password}}); r.StatusCode != http.StatusForbidden {
		t.Errorf("password sign-up with OIDC only = %d", r.StatusCode)
	}
	if n := e.users(); n != 1 {
		t.Errorf("%d accounts", n)
	}
	// The account from before links to its identity with its password —
	// the one thing a password still does here — and signs in.
	e.user("sub-old", "old@example.com", true)
	b := e.browser()
	if body := e.toLinkPage(b); !strings.Contains(body, "Password sign-in is off on this server") {
		t.Errorf("the link page with OIDC only does not say what the password is for: %.800s", body)
	}
	if resp, body := e.link(b, url.Values{"password": {password}}); resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" ||
		!strings.Contains(body, `data-testid="composer"`) {
		t.Fatalf("the link with OIDC only = %d at %s: %.300s", resp.StatusCode, resp.Request.URL, body)
	}
	if r := c.Post("/login", url.Values{"email": {"old@example.com"}, "password": {password}}); r.StatusCode != http.StatusForbidden {
		t.Errorf("password sign-in with OIDC only after the link = %d", r.StatusCode)
	}
}

// mustHash is a real argon2id hash of password, in the format Weft stores.
func mustHash(t *testing.T) string {
	t.Helper()
	salt := []byte("0123456789abcdef")
	key := argon2.IDKey([]byte(password), salt, 2, 19*1024, 1, 32)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, 19*1024, 2, 1, b64.EncodeToString(salt), b64.EncodeToString(key))
}

func TestWeftStartsWhileTheProviderIsDownAndSignsInOnceItIsBack(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil, func(e *ssoEnv) { e.down.Store(true) })
	c := testenv.NewClient(t, e.base)
	r := c.Get("/login")
	if r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `data-testid="sso-unreachable"`) || !strings.Contains(r.Body, `type="password"`) {
		t.Fatalf("the sign-in page while the provider is down = %d: %.800s", r.StatusCode, r.Body)
	}
	if r := c.Get("/auth/oidc/login"); r.StatusCode != http.StatusServiceUnavailable || !strings.Contains(r.Body, "not reachable") {
		t.Errorf("sign-in while the provider is down = %d: %.300s", r.StatusCode, r.Body)
	}
	c.Register("pw@example.com", password) // passwords work meanwhile
	e.down.Store(false)
	e.user("sub-back", "back@example.com", true)
	e.signedIn(e.browser(), "back@example.com")
	if r := testenv.NewClient(t, e.base).Get("/login"); strings.Contains(r.Body, `data-testid="sso-unreachable"`) {
		t.Errorf("the sign-in page still says the provider is down")
	}
}

// The single sign-on routes with OIDC configured, for the owner (signed in),
// another user and an anonymous visitor (the authorization table covers
// them without configuration).
func TestSingleSignOnRoutesAnswerSignedInAndAnonymousCallers(t *testing.T) {
	t.Parallel()
	e := startSSO(t, nil)
	owner := testenv.NewClient(t, e.base)
	owner.Register("owner@example.com", password)
	anon := testenv.NewClient(t, e.base)
	for _, c := range []struct {
		name        string
		client      *testenv.Client
		method      string
		path        string
		status      int
		locationHas string
	}{
		{"owner", owner, "GET", "/auth/oidc/login", http.StatusSeeOther, "/"},
		{"owner", owner, "POST", "/auth/oidc/login", http.StatusSeeOther, "/"},
		{"anonymous", anon, "GET", "/auth/oidc/login", http.StatusSeeOther, e.idp.AuthorizationEndpoint()},
		{"anonymous", anon, "POST", "/auth/oidc/login", http.StatusSeeOther, e.idp.AuthorizationEndpoint()},
		{"owner", owner, "GET", "/auth/oidc/callback?state=x&code=y", http.StatusBadRequest, ""},
		{"anonymous", testenv.NewClient(t, e.base), "GET", "/auth/oidc/callback?state=x&code=y", http.StatusBadRequest, ""},
		{"owner", owner, "GET", "/auth/oidc/link", http.StatusSeeOther, "/"},
		{"owner", owner, "POST", "/auth/oidc/link", http.StatusSeeOther, "/"},
		{"anonymous", anon, "GET", "/auth/oidc/link", http.StatusBadRequest, ""},
		{"anonymous", anon, "POST", "/auth/oidc/link", http.StatusBadRequest, ""},
	} {
		var form url.Values
		if c.method == "POST" {
			form = url.Values{}
		}
		r := c.client.Do(c.method, c.path, form)
		if r.StatusCode != c.status || !strings.HasPrefix(r.Header.Get("Location"), c.locationHas) {
			t.Errorf("%s %s as %s = %d %q, want %d %q", c.method, c.path, c.name, r.StatusCode, r.Header.Get("Location"), c.status, c.locationHas)
		}
	}
	// The sign-in page's forms may redirect to the provider; other pages' not.
	if csp := anon.Get("/login").Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+e.idp.Addr()+";") {
		t.Errorf("the sign-in page's policy does not let its form reach the provider: %s", csp)
	}
	if csp := owner.Get("/settings").Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self';") {
		t.Errorf("another page's policy: %s", csp)
	}
	// A cross-site POST is refused like every other.
	r := anon.DoHeader("POST", "/auth/oidc/login", url.Values{}, http.Header{"Sec-Fetch-Site": {"cross-site"}})
	if r.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site POST /auth/oidc/login = %d", r.StatusCode)
	}
}

// A provider that accepts connections and never answers holds start-up
// for the provider timeout at most.
func TestStartUpWaitsForAHangingProviderOnlyUntilTheTimeout(t *testing.T) {
	t.Parallel()
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hang.Close() })
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	public, _ := url.Parse("http://127.0.0.1")
	start := time.Now()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{HTTP: handlers.Config{PublicURL: public,
		OIDC: &handlers.OIDCConfig{Issuer: "http://" + hang.Addr().String(), ClientID: "weft", Timeout: 300 * time.Millisecond}}})
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("start-up took %v with a hanging provider", took)
	}
	r := testenv.NewClient(t, app.TS.URL).Get("/login")
	if r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `data-testid="sso-unreachable"`) {
		t.Errorf("/login = %d: %.500s", r.StatusCode, r.Body)
	}
}

// Refused callbacks count against the address's sign-in limit, like wrong
// passwords; a successful one does not.
func TestSingleSignOnCallbacksAreRateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	e := startSSO(t, func(c *handlers.Config) {
		c.LoginLimit = handlers.LoginLimit{PerIP: 3, PerAccount: 3, Window: time.Hour}
	})
	e.user("sub-r", "r@example.com", true)
	e.signedIn(e.browser(), "r@example.com") // does not count
	c := testenv.NewClient(t, e.base)
	for i := range 3 {
		if r := c.Get("/auth/oidc/callback?state=forged&code=x"); r.StatusCode != http.StatusBadRequest {
			t.Fatalf("forged callback %d = %d", i, r.StatusCode)
		}
	}
	if r := c.Get("/auth/oidc/callback?state=forged&code=x"); r.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the fourth refused callback = %d, want 429", r.StatusCode)
	}
}

// A provider that sends no email_verified (Microsoft Entra ID) links by
// email only when the administrator says its emails can be trusted.
func TestSingleSignOnTrustsUnverifiedEmailsOnlyWhenTold(t *testing.T) {
	t.Parallel()
	e := startSSO(t, func(c *handlers.Config) { c.OIDC.TrustEmail = true })
	testenv.NewClient(t, e.base).Register("erin@example.com", password)
	e.user("sub-erin", "erin@example.com", false)
	e.linkedIn(e.browser(), "erin@example.com", password)
	u, _ := e.store.UserByEmail(context.Background(), "erin@example.com")
	if ids := e.identities(u.ID); len(ids) != 1 {
		t.Errorf("erin's identities: %+v", ids)
	}
}
