package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"weft/handlers"
	"weft/internal/testenv"
)

const password = "correct horse battery"

func TestAUserRegistersLogsOutAndLogsBackIn(t *testing.T) {
	t.Parallel()
	ts := testenv.Server(t, testenv.NewDB(t), handlers.Config{})
	c := testenv.NewClient(t, ts.URL)

	if r := c.Get("/"); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/login" {
		t.Fatalf("anonymous / = %d %q, want a redirect to /login", r.StatusCode, r.Header.Get("Location"))
	}
	c.Register("ada@example.com", password)
	home := c.Get("/")
	if home.StatusCode != http.StatusOK || !strings.Contains(home.Body, `data-testid="composer"`) {
		t.Fatalf("/ after registering = %d, composer shown: %v", home.StatusCode, strings.Contains(home.Body, "composer"))
	}
	if r := c.Post("/logout", nil); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/login" {
		t.Fatalf("logout = %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	if r := c.Get("/"); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("/ after logout = %d, want a redirect", r.StatusCode)
	}
	r := c.Post("/login", url.Values{"email": {"ADA@example.com"}, "password": {password}})
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/" {
		t.Fatalf("login = %d %q: %.300s", r.StatusCode, r.Header.Get("Location"), r.Body)
	}
	if r := c.Get("/"); r.StatusCode != http.StatusOK {
		t.Fatalf("/ after login = %d", r.StatusCode)
	}
}

func TestRegistrationRejectsBadInputWithAClearMessage(t *testing.T) {
	t.Parallel()
	ts := testenv.Server(t, testenv.NewDB(t), handlers.Config{})
	c := testenv.NewClient(t, ts.URL)
	c.Register("taken@example.com", password)
	other := testenv.NewClient(t, ts.URL)
	for _, tc := range []struct {
		email, password, want string
		status                int
	}{
		{"not-an-email", password, "valid email", http.StatusUnprocessableEntity},
		{"short@example.com", "short", "at least 8", http.StatusUnprocessableEntity},
		{"Taken@example.com", password, "already exists", http.StatusConflict},
	} {
		r := other.Post("/register", url.Values{"email": {tc.email}, "password": {tc.password}})
		if r.StatusCode != tc.status || !strings.Contains(r.Body, tc.want) || !strings.Contains(r.Body, `data-testid="error"`) {
			t.Errorf("register %q/%q = %d, want %d with %q", tc.email, tc.password, r.StatusCode, tc.status, tc.want)
		}
		if !strings.Contains(r.Body, `value="`+tc.email+`"`) {
			t.Errorf("register %q: the typed email was not kept in the form", tc.email)
		}
	}
}

func TestUnknownEmailAndWrongPasswordGetTheSameMessage(t *testing.T) {
	t.Parallel()
	ts := testenv.Server(t, testenv.NewDB(t), handlers.Config{})
	testenv.NewClient(t, ts.URL).Register("known@example.com", password)
	c := testenv.NewClient(t, ts.URL)
	wrong := c.Post("/login", url.Values{"email": {"known@example.com"}, "password": {"wrong password"}})
	unknown := c.Post("/login", url.Values{"email": {"nobody@example.com"}, "password": {"wrong password"}})
	for _, r := range []testenv.Response{wrong, unknown} {
		if r.StatusCode != http.StatusUnauthorized || !strings.Contains(r.Body, "Email or password is incorrect.") {
			t.Fatalf("failed login = %d: %.400s", r.StatusCode, r.Body)
		}
	}
	if c.SessionCookie() != "" {
		t.Fatal("a failed login set a session cookie")
	}
}

func TestSessionTokenIsRenewedAtLoginAndTheOldOneStopsWorking(t *testing.T) {
	t.Parallel()
	ts := testenv.Server(t, testenv.NewDB(t), handlers.Config{})
	c := testenv.NewClient(t, ts.URL)
	c.Register("fix@example.com", password)
	before := c.SessionCookie()
	if before == "" {
		t.Fatal("no session cookie after registering")
	}
	// Signing in again while carrying a token (as after a planted cookie)
	// must issue a new one.
	if r := c.Post("/login", url.Values{"email": {"fix@example.com"}, "password": {password}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("login = %d", r.StatusCode)
	}
	after := c.SessionCookie()
	if after == "" || after == before {
		t.Fatalf("session token not renewed at login: before %q after %q", before, after)
	}
	stale := testenv.NewClient(t, ts.URL)
	u, _ := url.Parse(ts.URL)
	stale.HTTP.Jar.SetCookies(u, []*http.Cookie{{Name: "weft_session", Value: before}})
	if r := stale.Get("/"); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("the pre-login token still opens / (status %d)", r.StatusCode)
	}
	// Logout destroys the session on the server, not just the cookie.
	c.Post("/logout", nil)
	replay := testenv.NewClient(t, ts.URL)
	replay.HTTP.Jar.SetCookies(u, []*http.Cookie{{Name: "weft_session", Value: after}})
	if r := replay.Get("/"); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("a token used after logout still opens / (status %d)", r.StatusCode)
	}
}

func TestTheSessionCookieIsHttpOnlyLaxAndSecureWhenConfigured(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	for _, secure := range []bool{false, true} {
		ts := testenv.Server(t, store, handlers.Config{SecureCookies: secure})
		c := testenv.NewClient(t, ts.URL)
		email := "flags" + map[bool]string{false: "a", true: "b"}[secure] + "@example.com"
		r := c.Post("/register", url.Values{"email": {email}, "password": {password}})
		set := r.Header.Get("Set-Cookie")
		if !strings.Contains(set, "HttpOnly") || !strings.Contains(set, "SameSite=Lax") {
			t.Fatalf("session cookie %q lacks HttpOnly or SameSite=Lax", set)
		}
		if strings.Contains(set, "Secure") != secure {
			t.Fatalf("secure=%v: cookie %q", secure, set)
		}
	}
}

func TestLoginIsRateLimitedPerAccountAndPerAddress(t *testing.T) {
	t.Parallel()
	ts := testenv.Server(t, testenv.NewDB(t), handlers.Config{
		LoginLimit: handlers.LoginLimit{PerAccount: 3, PerIP: 6, Window: time.Hour},
	})
	testenv.NewClient(t, ts.URL).Register("victim@example.com", password)
	testenv.NewClient(t, ts.URL).Register("bystander@example.com", password)
	c := testenv.NewClient(t, ts.URL)
	login := func(email, pw string) testenv.Response {
		return c.Post("/login", url.Values{"email": {email}, "password": {pw}})
	}
	for i := 0; i < 3; i++ {
		if r := login("victim@example.com", "guess"+string(rune('a'+i))); r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("attempt %d = %d, want 401", i+1, r.StatusCode)
		}
	}
	r := login("victim@example.com", password)
	if r.StatusCode != http.StatusTooManyRequests || !strings.Contains(r.Body, "Too many failed sign-in attempts") {
		t.Fatalf("after 3 failures even the right password = %d, want 429", r.StatusCode)
	}
	// Other accounts from this address still work until the address's own
	// limit is reached.
	if r := login("bystander@example.com", password); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("another account = %d, want a successful login", r.StatusCode)
	}
	for i := 0; i < 3; i++ {
		login("nobody"+string(rune('a'+i))+"@example.com", "x")
	}
	if r := login("bystander@example.com", password); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("after 6 failures from one address = %d, want 429", r.StatusCode)
	}
}

func TestAnAdminCanCloseSignUp(t *testing.T) {
	t.Parallel()
	ts := testenv.Server(t, testenv.NewDB(t), handlers.Config{})
	admin := testenv.NewClient(t, ts.URL)
	admin.Register("admin@example.com", password)
	member := testenv.NewClient(t, ts.URL)
	member.Register("member@example.com", password)

	if r := member.Post("/admin/signup", url.Values{"mode": {"closed"}}); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a member closing sign-up = %d, want 403", r.StatusCode)
	}
	if r := admin.Post("/admin/signup", url.Values{"mode": {"closed"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("the admin closing sign-up = %d", r.StatusCode)
	}
	if r := admin.Post("/admin/signup", url.Values{"mode": {"sideways"}}); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("an unknown mode = %d, want 400", r.StatusCode)
	}
	late := testenv.NewClient(t, ts.URL)
	if r := late.Get("/register"); !strings.Contains(r.Body, "Sign-up is closed") {
		t.Fatalf("/register does not say sign-up is closed: %.300s", r.Body)
	}
	r := late.Post("/register", url.Values{"email": {"late@example.com"}, "password": {password}})
	if r.StatusCode != http.StatusForbidden || late.SessionCookie() != "" {
		t.Fatalf("registering while closed = %d", r.StatusCode)
	}
	admin.Post("/admin/signup", url.Values{"mode": {"open"}})
	late.Register("late@example.com", password)
}
