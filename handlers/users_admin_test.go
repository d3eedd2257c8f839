package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"weft/chat"
	"weft/db"
	"weft/handlers"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// adminAndMember starts Weft with an administrator (the first account) and
// a member, each signed in.
func adminAndMember(t *testing.T, o testenv.Options) (*testenv.App, *db.DB, *testenv.Client, *testenv.Client, db.User) {
	t.Helper()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, o)
	admin := testenv.NewClient(t, app.TS.URL)
	admin.Register("admin@example.com", password)
	member := testenv.NewClient(t, app.TS.URL)
	member.Register("member@example.com", password)
	u, err := store.UserByEmail(context.Background(), "member@example.com")
	if err != nil {
		t.Fatal(err)
	}
	return app, store, admin, member, u
}

func userPath(u int64, action string) string { return fmt.Sprintf("/admin/users/%d/%s", u, action) }

// streamEnds reads an open event stream in the background; the channel
// closes when the server ends the response.
func streamEnds(body io.Reader) <-chan struct{} {
	ended := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, body); close(ended) }()
	return ended
}

func runStatus(t *testing.T, store *db.DB, user int64, run string) string {
	t.Helper()
	var id int64
	fmt.Sscan(run, &id)
	r, err := store.Run(context.Background(), user, id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

func TestDisablingAUserEndsTheirSessionStreamAndRunAndEnablingLetsThemBackIn(t *testing.T) {
	t.Parallel()
	app, store, admin, member, m := adminAndMember(t, testenv.Options{})
	thread, run := slowThread(t, app, member)
	queued := sendInThread(t, member, thread, "and then?") // waits behind the running answer
	status, body, closeStream := openStream(t, member, run)
	defer closeStream()
	if status != http.StatusOK {
		t.Fatalf("stream = %d", status)
	}
	ended := streamEnds(body)

	if r := admin.Post(userPath(m.ID, "disable"), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable = %d: %.300s", r.StatusCode, r.Body)
	}
	testwait.Closed(t, "the disabled user's event stream to end", 5*time.Second, ended)
	testwait.For(t, "the disabled user's runs to be cancelled", 10*time.Second, func() bool {
		return runStatus(t, store, m.ID, run) == db.RunCancelled && runStatus(t, store, m.ID, queued) == db.RunCancelled
	})
	if err := app.Fake.WaitCancelled(context.Background(), 1); err != nil {
		t.Fatalf("the model request was not cancelled: %v", err)
	}
	if r := member.Get("/"); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/login" {
		t.Fatalf("the disabled user's session still opens / (%d %q)", r.StatusCode, r.Header.Get("Location"))
	}
	var left int
	if err := store.Pool.QueryRow(context.Background(), "SELECT count(*) FROM user_sessions WHERE user_id = $1", m.ID).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d sessions of the disabled user left (%v)", left, err)
	}
	if r := member.Post("/login", url.Values{"email": {"member@example.com"}, "password": {password}}); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a disabled user signs in: %d", r.StatusCode)
	}
	if r := admin.Get("/admin/users?state=disabled"); !strings.Contains(r.Body, `data-user-id="`+fmt.Sprint(m.ID)+`"`) {
		t.Fatal("the disabled filter does not list the disabled user")
	}

	if r := admin.Post(userPath(m.ID, "enable"), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("enable = %d", r.StatusCode)
	}
	member.Login("member@example.com", password)
	if r := member.Get("/"); r.StatusCode != http.StatusOK {
		t.Fatalf("the enabled user's / = %d", r.StatusCode)
	}
}

// A member's stream and run live on instance B; an administrator disables
// the member through instance A: B's stream ends at its session sweep and
// B's run is cancelled through the stop note.
func TestDisablingAUserOnOneInstanceEndsTheirStreamAndRunOnAnother(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	fake := fakeollama.New(t)
	a := testenv.Start(t, store, testenv.Options{Fake: fake, Chat: chat.Config{Instance: "A"}})
	b := testenv.Start(t, store, testenv.Options{Fake: fake, Chat: chat.Config{Instance: "B"},
		HTTP: handlers.Config{StreamSweep: 100 * time.Millisecond}})
	admin := testenv.NewClient(t, a.TS.URL)
	admin.Register("admin@example.com", password)
	member := testenv.NewClient(t, b.TS.URL)
	member.Register("member@example.com", password)
	m, err := store.UserByEmail(context.Background(), "member@example.com")
	if err != nil {
		t.Fatal(err)
	}
	_, run := slowThread(t, b, member)
	status, body, closeStream := openStream(t, member, run)
	defer closeStream()
	if status != http.StatusOK {
		t.Fatalf("stream = %d", status)
	}
	ended := streamEnds(body)
	if r := admin.Post(userPath(m.ID, "disable"), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable = %d", r.StatusCode)
	}
	testwait.Closed(t, "the stream on the other instance to end", 5*time.Second, ended)
	if err := fake.WaitCancelled(context.Background(), 1); err != nil {
		t.Fatalf("the model request on the other instance was not cancelled: %v", err)
	}
	testwait.For(t, "the run on the other instance to end cancelled", 10*time.Second, func() bool {
		return runStatus(t, store, m.ID, run) == db.RunCancelled
	})
}

func TestTheLastAdministratorCannotBeRevokedDisabledOrDeleted(t *testing.T) {
	t.Parallel()
	_, store, admin, member, m := adminAndMember(t, testenv.Options{})
	ctx := context.Background()
	me, err := store.UserByEmail(ctx, "admin@example.com")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		form url.Values
	}{
		{userPath(me.ID, "role"), url.Values{"role": {"member"}}},
		{userPath(me.ID, "disable"), nil},
		{userPath(me.ID, "delete"), url.Values{"confirm": {"admin@example.com"}}},
	} {
		if r := admin.Post(c.path, c.form); r.StatusCode != http.StatusConflict || !strings.Contains(r.Body, "without an enabled administrator") {
			t.Fatalf("POST %s as the only admin = %d: %.300s", c.path, r.StatusCode, r.Body)
		}
	}
	if u, _ := store.UserByID(ctx, me.ID); !u.IsAdmin() || u.Disabled {
		t.Fatalf("the last admin was changed: %+v", u)
	}
	// A member is refused every administrator's action.
	if r := member.Post(userPath(me.ID, "role"), url.Values{"role": {"member"}}); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a member revoking the admin = %d", r.StatusCode)
	}
	// With a second administrator, the first may step down; the second is
	// then the last one.
	if r := admin.Post(userPath(m.ID, "role"), url.Values{"role": {"admin"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("make admin = %d", r.StatusCode)
	}
	if r := admin.Post(userPath(me.ID, "role"), url.Values{"role": {"member"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("an admin stepping down beside another = %d", r.StatusCode)
	}
	if r := admin.Get("/admin/users"); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a former admin's /admin/users = %d", r.StatusCode)
	}
	if r := member.Post(userPath(m.ID, "disable"), nil); r.StatusCode != http.StatusConflict {
		t.Fatalf("the new last admin disabling themselves = %d", r.StatusCode)
	}
	for _, c := range []struct {
		method, action string
		form           url.Values
	}{
		{"GET", "", nil}, {"POST", "disable", nil}, {"POST", "enable", nil}, {"POST", "role", url.Values{"role": {"admin"}}},
		{"POST", "reset-link", nil}, {"POST", "delete", url.Values{"confirm": {"x@example.com"}}},
	} {
		path := strings.TrimSuffix(userPath(999999, c.action), "/")
		if r := member.Do(c.method, path, c.form); r.StatusCode != http.StatusNotFound {
			t.Fatalf("%s %s (no such account) = %d", c.method, path, r.StatusCode)
		}
	}
	if r := member.Post("/admin/invites/999999/revoke", nil); r.StatusCode != http.StatusNotFound {
		t.Fatalf("revoke an unknown invite = %d", r.StatusCode)
	}
}

// Two administrators revoke each other at the same moment: one of them
// wins, and the instance keeps exactly one administrator.
func TestTwoAdministratorsRevokingEachOtherAtOnceLeaveOne(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	newUser := func(email string) db.User {
		u, _, err := store.CreateUser(ctx, email, email, "x")
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	first := newUser("first@example.com") // the admin
	for i := range 10 {
		other := newUser(fmt.Sprintf("other%d@example.com", i))
		if err := store.SetUserRole(ctx, first.ID, other.ID, db.RoleAdmin); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 2)
		for j, pair := range [][2]int64{{first.ID, other.ID}, {other.ID, first.ID}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[j] = store.SetUserRole(ctx, pair[0], pair[1], db.RoleMember)
			}()
		}
		close(start)
		wg.Wait()
		var admins []int64
		rows, _, err := store.ListUsers(ctx, db.UserFilter{Role: db.RoleAdmin, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			admins = append(admins, r.ID)
		}
		if len(admins) != 1 || (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("round %d: admins %v, errors %v", i, admins, errs)
		}
		first = db.User{ID: admins[0]}
	}
}

var resetURL = regexp.MustCompile(`data-testid="reset-url">https?://[^<]*(/reset/[A-Za-z0-9]+)<`)

func TestAPasswordResetLinkWorksOnceEndsEverySessionAndExpires(t *testing.T) {
	t.Parallel()
	app, store, admin, member, m := adminAndMember(t, testenv.Options{})
	ctx := context.Background()
	second := testenv.NewClient(t, app.TS.URL) // another browser of the member
	second.Login("member@example.com", password)

	old := resetURL.FindStringSubmatch(admin.Post(userPath(m.ID, "reset-link"), nil).Body)
	page := admin.Post(userPath(m.ID, "reset-link"), nil)
	link := resetURL.FindStringSubmatch(page.Body)
	if page.StatusCode != http.StatusOK || old == nil || link == nil {
		t.Fatalf("reset link = %d: %.500s", page.StatusCode, page.Body)
	}
	if r := member.Post(userPath(m.ID, "reset-link"), nil); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a member making a reset link = %d", r.StatusCode)
	}
	anon := testenv.NewClient(t, app.TS.URL)
	if r := anon.Get(old[1]); r.StatusCode != http.StatusGone {
		t.Fatalf("the older link after a newer one = %d", r.StatusCode)
	}
	if r := anon.Get(link[1]); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "member@example.com") {
		t.Fatalf("open the reset link = %d", r.StatusCode)
	}
	if r := anon.Post(link[1], url.Values{"password": {"short"}}); r.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a too short new password = %d", r.StatusCode)
	}
	const newPassword = "a brand new passphrase"
	if r := anon.Post(link[1], url.Values{"password": {newPassword}}); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/login?reset" {
		t.Fatalf("reset = %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	for _, c := range []*testenv.Client{member, second} {
		if r := c.Get("/"); r.StatusCode != http.StatusSeeOther {
			t.Fatalf("a session of the member survived the reset: %d", r.StatusCode)
		}
	}
	if r := anon.Post(link[1], url.Values{"password": {"yet another passphrase"}}); r.StatusCode != http.StatusGone {
		t.Fatalf("the link used twice = %d", r.StatusCode)
	}
	if r := member.Post("/login", url.Values{"email": {"member@example.com"}, "password": {password}}); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the old password after a reset = %d", r.StatusCode)
	}
	member.Login("member@example.com", newPassword)

	// An expired link.
	a, _ := store.UserByEmail(ctx, "admin@example.com")
	if err := store.CreatePasswordReset(ctx, a.ID, m.ID, "expiredtoken", time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if r := anon.Get("/reset/expiredtoken"); r.StatusCode != http.StatusGone || !strings.Contains(r.Body, "expired") {
		t.Fatalf("an expired link = %d", r.StatusCode)
	}
	if r := anon.Post("/reset/expiredtoken", url.Values{"password": {"yet another passphrase"}}); r.StatusCode != http.StatusGone {
		t.Fatalf("using an expired link = %d", r.StatusCode)
	}
	if r := admin.Post(userPath(999999, "reset-link"), nil); r.StatusCode != http.StatusNotFound {
		t.Fatalf("a reset link for an unknown account = %d", r.StatusCode)
	}
}

func TestChangingThePasswordNeedsTheCurrentOneAndSignsOutOtherSessions(t *testing.T) {
	t.Parallel()
	app, _, _, member, _ := adminAndMember(t, testenv.Options{})
	other := testenv.NewClient(t, app.TS.URL)
	other.Login("member@example.com", password)
	const next = "another long passphrase"
	r := member.Post("/settings/password", url.Values{"current_password": {"not my password"}, "new_password": {next}})
	if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "current password is not right") {
		t.Fatalf("a wrong current password = %d", r.StatusCode)
	}
	if r := other.Get("/"); r.StatusCode != http.StatusOK {
		t.Fatal("a refused change signed the other session out")
	}
	r = member.Post("/settings/password", url.Values{"current_password": {password}, "new_password": {next}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("change password = %d: %.300s", r.StatusCode, r.Body)
	}
	if r := member.Get(r.Header.Get("Location")); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "Your password was changed") {
		t.Fatalf("this session after the change = %d", r.StatusCode)
	}
	if r := other.Get("/"); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("the other session survived the password change: %d", r.StatusCode)
	}
	if r := other.Post("/login", url.Values{"email": {"member@example.com"}, "password": {password}}); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the old password = %d", r.StatusCode)
	}
	other.Login("member@example.com", next)
}

var sessionRow = regexp.MustCompile(`data-testid="session-row" data-session-id="(\d+)" data-current="(true|false)"`)

func TestSigningOutOtherSessionsKeepsThisOne(t *testing.T) {
	t.Parallel()
	app, _, _, member, _ := adminAndMember(t, testenv.Options{})
	phone := testenv.NewClient(t, app.TS.URL)
	phone.Login("member@example.com", password)
	laptop := testenv.NewClient(t, app.TS.URL)
	laptop.Login("member@example.com", password)
	rows := sessionRow.FindAllStringSubmatch(member.Get("/settings").Body, -1)
	if len(rows) != 3 || rows[0][2] != "true" {
		t.Fatalf("the session list: %v", rows)
	}
	// Sign out one session by its row (phone's: the first other one is
	// the most recently seen, the laptop).
	if r := member.Post("/settings/sessions/"+rows[1][1]+"/delete", nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out one session = %d", r.StatusCode)
	}
	if r := laptop.Get("/"); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("the signed-out session still works: %d", r.StatusCode)
	}
	if r := phone.Get("/"); r.StatusCode != http.StatusOK {
		t.Fatalf("another session was signed out too: %d", r.StatusCode)
	}
	if r := member.Post("/settings/sessions/others", nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out others = %d", r.StatusCode)
	}
	if r := phone.Get("/"); r.StatusCode != http.StatusSeeOther {
		t.Fatal("another session survived 'sign out other sessions'")
	}
	page := member.Get("/settings")
	if page.StatusCode != http.StatusOK {
		t.Fatalf("this session after signing out the others = %d", page.StatusCode)
	}
	if rows := sessionRow.FindAllStringSubmatch(page.Body, -1); len(rows) != 1 || rows[0][2] != "true" {
		t.Fatalf("sessions left: %v", rows)
	}
}

var inviteURL = regexp.MustCompile(`data-testid="invite-url">https?://[^<]*(/invite/([A-Za-z0-9]+))<`)

func makeInvite(t *testing.T, admin *testenv.Client, form url.Values) (path, token string) {
	t.Helper()
	r := admin.Post("/admin/invites", form)
	m := inviteURL.FindStringSubmatch(r.Body)
	if r.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("create invite = %d: %.500s", r.StatusCode, r.Body)
	}
	return m[1], m[2]
}

func TestInviteOnlySignUpTakesAnInviteOnceAndRefusesExpiredOrUsedOnes(t *testing.T) {
	t.Parallel()
	app, store, admin, _, _ := adminAndMember(t, testenv.Options{})
	ctx := context.Background()
	if r := admin.Post("/admin/signup", url.Values{"mode": {"invite"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("invite-only = %d", r.StatusCode)
	}
	hashed, _ := app.Handler.PasswordHashes()
	defer func() {
		// Refused sign-ups cost no hashing: only the accepted one hashed.
		if done, _ := app.Handler.PasswordHashes(); done != hashed+1 && !t.Failed() {
			t.Errorf("%d password hashes for one accepted sign-up", done-hashed)
		}
	}()
	newcomer := testenv.NewClient(t, app.TS.URL)
	if r := newcomer.Get("/register"); !strings.Contains(r.Body, `data-testid="invite-only"`) {
		t.Fatal("/register does not say sign-up is by invitation")
	}
	if r := newcomer.Post("/register", url.Values{"email": {"new@example.com"}, "password": {password}}); r.StatusCode != http.StatusForbidden || !strings.Contains(r.Body, "invitation only") {
		t.Fatalf("sign-up without an invite = %d", r.StatusCode)
	}
	path, token := makeInvite(t, admin, url.Values{"days": {"7"}})
	if r := newcomer.Get(path); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `name="invite" value="`+token+`"`) {
		t.Fatalf("open the invite = %d: %.300s", r.StatusCode, r.Body)
	}
	if r := newcomer.Post("/register", url.Values{"email": {"new@example.com"}, "password": {password}, "invite": {token}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-up with the invite = %d: %.300s", r.StatusCode, r.Body)
	}
	again := testenv.NewClient(t, app.TS.URL)
	if r := again.Get(path); r.StatusCode != http.StatusGone || !strings.Contains(r.Body, "already used") {
		t.Fatalf("open a used invite = %d", r.StatusCode)
	}
	if r := again.Post("/register", url.Values{"email": {"second@example.com"}, "password": {password}, "invite": {token}}); r.StatusCode != http.StatusGone {
		t.Fatalf("sign-up with a used invite = %d", r.StatusCode)
	}
	list := admin.Get("/admin/users").Body
	if !strings.Contains(list, `data-status="used"`) || !strings.Contains(list, "new@example.com") {
		t.Fatal("the invite list does not show who used the invite")
	}
	// Bound to an address.
	_, bound := makeInvite(t, admin, url.Values{"email": {"only@example.com"}})
	if r := again.Post("/register", url.Values{"email": {"else@example.com"}, "password": {password}, "invite": {bound}}); r.StatusCode != http.StatusForbidden || !strings.Contains(r.Body, "another email") {
		t.Fatalf("sign-up with another address's invite = %d", r.StatusCode)
	}
	// Expired.
	a, _ := store.UserByEmail(ctx, "admin@example.com")
	if _, err := store.CreateInvite(ctx, a.ID, "expiredinvite", "", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if r := again.Get("/invite/expiredinvite"); r.StatusCode != http.StatusGone || !strings.Contains(r.Body, "expired") {
		t.Fatalf("open an expired invite = %d", r.StatusCode)
	}
	if r := again.Post("/register", url.Values{"email": {"late@example.com"}, "password": {password}, "invite": {"expiredinvite"}}); r.StatusCode != http.StatusGone {
		t.Fatalf("sign-up with an expired invite = %d", r.StatusCode)
	}
	// Revoked.
	_, revoked := makeInvite(t, admin, nil)
	id := regexp.MustCompile(`data-testid="invite-row" data-invite-id="(\d+)" data-status="unused"`).FindStringSubmatch(admin.Get("/admin/users").Body)
	if r := admin.Post("/admin/invites/"+id[1]+"/revoke", nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke = %d", r.StatusCode)
	}
	if r := again.Post("/register", url.Values{"email": {"gone@example.com"}, "password": {password}, "invite": {revoked}}); r.StatusCode != http.StatusNotFound {
		t.Fatalf("sign-up with a revoked invite = %d", r.StatusCode)
	}
	// Closed: nobody new, invite or not.
	_, unused := makeInvite(t, admin, nil)
	admin.Post("/admin/signup", url.Values{"mode": {"closed"}})
	if r := again.Post("/register", url.Values{"email": {"closed@example.com"}, "password": {password}, "invite": {unused}}); r.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-up with an invite while closed = %d", r.StatusCode)
	}
	if n, _ := store.CountUsers(ctx); n != 3 {
		t.Fatalf("%d accounts, want 3", n)
	}
}

// Several sign-ups race with one invite: exactly one account is made.
func TestSignUpsRacingWithOneInviteMakeOneAccount(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	admin, _, err := store.CreateUser(ctx, "admin@example.com", "admin", "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SetSetting(ctx, "signup_mode", db.SignupInvite); err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateInvite(ctx, admin.ID, "oneinvite", "", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	const n = 6
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, _, errs[i] = store.CreateAccount(ctx, db.NewAccount{Email: fmt.Sprintf("racer%d@example.com", i),
				PasswordHash: "x", Invite: "oneinvite"})
		}()
	}
	close(start)
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, db.ErrInviteUsed):
			t.Fatalf("a losing sign-up failed with %v, want ErrInviteUsed", err)
		}
	}
	if users, _ := store.CountUsers(ctx); won != 1 || users != 2 {
		t.Fatalf("%d sign-ups won, %d accounts", won, users)
	}
}

func TestTheFirstAccountIsStillMadeWithTheSetupTokenUnderInviteOnly(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	if err := store.SetSetting(ctx, "signup_mode", db.SignupInvite); err != nil {
		t.Fatal(err)
	}
	token, err := handlers.IssueSetupToken(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	app := testenv.Start(t, store, testenv.Options{})
	c := testenv.NewClient(t, app.TS.URL)
	r := c.Post("/register", url.Values{"email": {"admin@example.com"}, "password": {password}, "setup_token": {token}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("the first account under invite-only = %d: %.300s", r.StatusCode, r.Body)
	}
}

// Disabling an account whose agent run waits for an approval settles it
// as Stop does: the run and its approval end cancelled.
func TestDisablingAUserSettlesTheirPendingApprovalAsCancelled(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t, testenv.Options{}) // the first account: an administrator
	ctx := context.Background()
	admin := testenv.NewClient(t, e.app.TS.URL)
	admin.Register("second@example.com", password)
	second, err := e.app.Store.UserByEmail(ctx, "second@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.app.Store.SetUserRole(ctx, e.user.ID, second.ID, db.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	thread := e.start(`[[tool:delete_file {"path":"x.txt"}]]`)
	ap := e.pending(thread, db.StepApproval)
	if r := admin.Post(userPath(e.user.ID, "disable"), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable = %d: %.300s", r.StatusCode, r.Body)
	}
	var run db.Run
	testwait.For(t, "the waiting run to end", 10*time.Second, func() bool {
		r, err := e.app.Store.Run(ctx, e.user.ID, ap.RunID)
		if err != nil {
			t.Fatal(err)
		}
		run = r
		return !r.Active()
	})
	if run.Status != db.RunCancelled {
		t.Fatalf("the run ended %s, want cancelled", run.Status)
	}
	for _, s := range e.steps(run.ID) {
		if s.Kind == db.StepApproval && s.Status != db.StepCancelled {
			t.Errorf("the approval is %s after the account was disabled, want cancelled", s.Status)
		}
	}
}

// The list's last seen time is written at sign-in (and then at most every
// few minutes per session). A session is valid only while its
// user_sessions row exists: a session saved again by a request that was in
// flight when it was ended (scs writes a changed session at the end of a
// request) stays ended.
func TestLastSeenIsKeptAndAnEndedSessionSavedAgainStaysEnded(t *testing.T) {
	t.Parallel()
	_, store, admin, member, m := adminAndMember(t, testenv.Options{})
	ctx := context.Background()
	if u, err := store.AdminUser(ctx, m.ID); err != nil || u.LastSeenAt == nil {
		t.Fatalf("last seen after sign-up: %+v %v", u, err)
	}
	if r := admin.Get("/admin/users"); !strings.Contains(r.Body, "just now") {
		t.Fatal("the list does not say the member was seen just now")
	}
	// What a late save leaves: the scs row without its mapping.
	if _, err := store.Pool.Exec(ctx, "DELETE FROM user_sessions WHERE user_id = $1", m.ID); err != nil {
		t.Fatal(err)
	}
	token := member.SessionCookie()
	if r := member.Get("/"); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/login" {
		t.Fatalf("a session without its mapping still opens / (%d)", r.StatusCode)
	}
	var n int
	if err := store.Pool.QueryRow(ctx, "SELECT count(*) FROM sessions WHERE token = $1", token).Scan(&n); err != nil || token == "" || n != 0 {
		t.Fatalf("the unmapped session's row was not destroyed: %d %v", n, err)
	}
}

// A wrong current password on /settings counts as a failed sign-in of the
// account: a session left open cannot guess the password faster.
func TestWrongCurrentPasswordsCountAgainstTheAccountsLoginLimit(t *testing.T) {
	t.Parallel()
	_, _, _, member, _ := adminAndMember(t, testenv.Options{HTTP: handlers.Config{
		LoginLimit: handlers.LoginLimit{PerIP: 100, PerAccount: 2, Window: time.Minute}}})
	form := url.Values{"current_password": {"guess"}, "new_password": {"another long passphrase"}}
	for range 2 {
		if r := member.Post("/settings/password", form); r.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("a wrong current password = %d", r.StatusCode)
		}
	}
	form.Set("current_password", password)
	if r := member.Post("/settings/password", form); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("past the account's limit, even the right password = %d, want 429", r.StatusCode)
	}
}
