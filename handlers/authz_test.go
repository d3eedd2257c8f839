package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"weft/db"
	"weft/handlers"
	"weft/internal/testenv"
)

// TestEveryRouteAnswersOwnerOtherUserAndAnonymousCorrectly is the
// authorization table: every route of the route table, called by the owner
// of the object it names, by another signed-in user, and anonymously. A
// foreign id is a 404; anonymous visitors are sent to /login. Later issues
// add their routes here; the test fails when a route is missing.
func TestEveryRouteAnswersOwnerOtherUserAndAnonymousCorrectly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	ts, srv := testenv.ServerWithHandler(t, store, handlers.Config{})

	owner := testenv.NewClient(t, ts.URL)
	owner.Register("owner@example.com", password) // the first account: admin
	other := testenv.NewClient(t, ts.URL)
	other.Register("other@example.com", password)
	anon := testenv.NewClient(t, ts.URL)

	u, err := store.UserByEmail(ctx, "owner@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := store.CreateWorkspace(ctx, u.ID, "Second")
	if err != nil {
		t.Fatal(err)
	}
	newThread := func() int64 {
		th, _, err := store.CreateThread(ctx, u.ID, db.NewThread{WorkspaceID: ws.ID, Title: "t", Content: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		return th.ID
	}
	thread := newThread()
	W := fmt.Sprint(ws.ID)
	T := fmt.Sprint(thread)

	const (
		login = "→/login"
		self  = "any" // a route with no object id: the other user acts on their own data
	)
	type want struct{ owner, other, anon any }
	routes := []struct {
		method, pattern, path string
		form                  url.Values
		fresh                 bool // needs a fresh thread per caller (the owner's call destroys it)
		want                  want
	}{
		{"GET", "/", "/", nil, false, want{200, 200, login}},
		{"GET", "/healthz", "/healthz", nil, false, want{200, 200, 200}},
		{"GET", "/readyz", "/readyz", nil, false, want{200, 200, 200}},
		{"GET", "/metrics", "/metrics", nil, false, want{200, 200, 200}},
		{"GET", "/static/*", "/static/app.css", nil, false, want{200, 200, 200}},
		{"GET", "/login", "/login", nil, false, want{303, 303, 200}},
		{"GET", "/register", "/register", nil, false, want{303, 303, 200}},
		{"POST", "/t", "/t", url.Values{"workspace_id": {W}, "content": {"new"}}, false, want{303, 404, login}},
		{"GET", "/t/{id}", "/t/" + T, nil, false, want{200, 404, login}},
		{"POST", "/t/{id}/messages", "/t/" + T + "/messages", url.Values{"content": {"more"}}, false, want{303, 404, login}},
		{"POST", "/t/{id}/rename", "/t/" + T + "/rename", url.Values{"title": {"new title"}}, false, want{303, 404, login}},
		{"POST", "/t/{id}/pin", "/t/" + T + "/pin", url.Values{"pinned": {"true"}}, false, want{303, 404, login}},
		{"POST", "/t/{id}/archive", "/t/" + T + "/archive", url.Values{"archived": {"false"}}, false, want{303, 404, login}},
		{"POST", "/t/{id}/delete", "/t/%d/delete", nil, true, want{303, 404, login}},
		{"GET", "/w/{id}/threads", "/w/" + W + "/threads", nil, false, want{200, 404, login}},
		{"GET", "/workspaces", "/workspaces", nil, false, want{200, 200, login}},
		{"POST", "/workspaces", "/workspaces", url.Values{"name": {"Third"}}, false, want{303, 303, login}},
		{"POST", "/workspaces/switch", "/workspaces/switch", url.Values{"workspace_id": {W}}, false, want{303, 404, login}},
		{"POST", "/workspaces/{id}/rename", "/workspaces/" + W + "/rename", url.Values{"name": {"Renamed"}}, false, want{303, 404, login}},
		{"POST", "/workspaces/{id}/archive", "/workspaces/" + W + "/archive", url.Values{"archived": {"false"}}, false, want{303, 404, login}},
		{"GET", "/admin", "/admin", nil, false, want{200, 403, login}},
		{"POST", "/admin/signup", "/admin/signup", url.Values{"mode": {"open"}}, false, want{303, 403, login}},
		{"POST", "/login", "/login", url.Values{"email": {"nobody@example.com"}, "password": {"wrong password"}}, false, want{401, 401, 401}},
		{"POST", "/register", "/register", url.Values{"email": {"bad"}, "password": {"x"}}, false, want{422, 422, 422}},
		{"POST", "/logout", "/logout", nil, false, want{login, login, login}},
	}

	covered := map[string]bool{}
	for _, rt := range routes {
		covered[rt.method+" "+rt.pattern] = true
		// Anonymous and the other user first: their calls must change nothing
		// the owner's call relies on.
		for _, caller := range []struct {
			name   string
			client *testenv.Client
			want   any
		}{{"anonymous", anon, rt.want.anon}, {"other user", other, rt.want.other}, {"owner", owner, rt.want.owner}} {
			path := rt.path
			if rt.fresh {
				path = fmt.Sprintf(rt.path, newThread())
			}
			if rt.pattern == "/logout" && caller.name != "anonymous" {
				continue // checked on its own below, it would sign the caller out
			}
			r := caller.client.Do(rt.method, path, rt.form)
			switch w := caller.want.(type) {
			case int:
				if r.StatusCode != w {
					t.Errorf("%s %s as %s = %d, want %d", rt.method, path, caller.name, r.StatusCode, w)
				}
			case string:
				if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != strings.TrimPrefix(w, "→") {
					t.Errorf("%s %s as %s = %d %q, want a redirect %s", rt.method, path, caller.name, r.StatusCode, r.Header.Get("Location"), w)
				}
			}
			if r.StatusCode == http.StatusNotFound && strings.Contains(r.Body, "owner@example.com") {
				t.Errorf("%s %s as %s: the 404 page shows the owner's data", rt.method, path, caller.name)
			}
		}
	}
	var missing []string
	for _, r := range srv.Routes() {
		if !covered[r] {
			missing = append(missing, r)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("routes missing from the authorization table: %v", missing)
	}
	if r := other.Post("/logout", nil); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/login" {
		t.Errorf("POST /logout as a signed-in user = %d %q", r.StatusCode, r.Header.Get("Location"))
	}
}
