package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"weft/db"
	"weft/handlers"
	"weft/internal/testenv"
	"weft/media"
)

// shareEnv is an owner with threads, another signed-in user and an
// anonymous reader, on an app whose share links expire by a clock the test
// moves.
type shareEnv struct {
	t                  *testing.T
	app                *testenv.App
	owner, other, anon *testenv.Client
	user               db.User
	workspace          int64
	clock              atomic.Int64 // unix nanoseconds
}

func newShareEnv(t *testing.T) *shareEnv {
	t.Helper()
	e := &shareEnv{t: t}
	e.clock.Store(time.Now().UnixNano())
	e.app = testenv.Start(t, testenv.NewDB(t), testenv.Options{HTTP: handlers.Config{
		Now: func() time.Time { return time.Unix(0, e.clock.Load()) }}})
	e.owner = testenv.NewClient(t, e.app.TS.URL)
	e.owner.Register("sharer@example.com", password)
	e.other = testenv.NewClient(t, e.app.TS.URL)
	e.other.Register("other@example.com", password)
	e.anon = testenv.NewClient(t, e.app.TS.URL)
	var err error
	if e.user, err = e.app.Store.UserByEmail(context.Background(), "sharer@example.com"); err != nil {
		t.Fatal(err)
	}
	ws, err := e.app.Store.DefaultWorkspace(context.Background(), e.user.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.workspace = ws.ID
	return e
}

var threadLocation = regexp.MustCompile(`^/t/(\d+)`)

// startThread sends content as a new thread and waits for its answer.
func (e *shareEnv) startThread(content string) int64 {
	e.t.Helper()
	r := e.owner.Post("/t", url.Values{"workspace_id": {fmt.Sprint(e.workspace)}, "content": {content}})
	m := threadLocation.FindStringSubmatch(r.Header.Get("Location"))
	if r.StatusCode != http.StatusSeeOther || m == nil {
		e.t.Fatalf("new thread: %d %q %.300s", r.StatusCode, r.Header.Get("Location"), r.Body)
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	waitIdle(e.t, e.app.Store, e.user.ID, id)
	return id
}

// send sends content into a thread and waits for its answer.
func (e *shareEnv) send(thread int64, content string) {
	e.t.Helper()
	if r := e.owner.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {content}}); r.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("send %q: %d %.300s", content, r.StatusCode, r.Body)
	}
	waitIdle(e.t, e.app.Store, e.user.ID, thread)
}

var shareURLRe = regexp.MustCompile(`<a href="([^"]+)" data-testid="share-url" data-share-id="(\d+)"`)

// share makes a link to a thread through its form (a plain post) and
// returns its id and path (/s/TOKEN).
func (e *shareEnv) share(thread int64, form url.Values) (int64, string) {
	e.t.Helper()
	r := e.owner.Post(fmt.Sprintf("/t/%d/shares", thread), form)
	m := shareURLRe.FindStringSubmatch(r.Body)
	if r.StatusCode != http.StatusOK || m == nil {
		e.t.Fatalf("share thread %d: %d %.500s", thread, r.StatusCode, r.Body)
	}
	u, err := url.Parse(m[1])
	if err != nil || u.Scheme+"://"+u.Host != e.app.TS.URL || !strings.HasPrefix(u.Path, "/s/") {
		e.t.Fatalf("the share URL %q is not an address of this server (%s)", m[1], e.app.TS.URL)
	}
	id, _ := strconv.ParseInt(m[2], 10, 64)
	return id, u.Path
}

// messagesOf are the "role: text" of the messages a page shows.
func messagesOf(body string) []string {
	re := regexp.MustCompile(`(?s)data-testid="message" data-message-id="\d+" data-role="(\w+)".*?data-testid="message-body">(.*?)</div>`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		text := strings.TrimSpace(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(m[2], ""))
		out = append(out, m[1]+": "+text)
	}
	return out
}

// A share link shows the thread's visible path as it was when it was made —
// not a branch left, not a message sent later — to anyone with the link,
// signed in or not, read-only: no sidebar, composer or message controls,
// nothing that links into the app, and marked not to be indexed.
func TestAShareLinkShowsTheVisiblePathAsItWasWhenMadeReadOnlyToAnyone(t *testing.T) {
	t.Parallel()
	e := newShareEnv(t)
	ctx := context.Background()
	thread := e.startThread("alpha question")
	e.send(thread, "bravo old")
	path, _, err := e.app.Store.ActivePath(ctx, e.user.ID, thread, 10)
	if err != nil || len(path) != 4 {
		t.Fatalf("the path: %d messages, %v", len(path), err)
	}
	if r := e.owner.Post(fmt.Sprintf("/m/%d/edit", path[2].ID), url.Values{"content": {"bravo new"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit: %d", r.StatusCode)
	}
	waitIdle(t, e.app.Store, e.user.ID, thread)

	// What belongs to the owner's workspace, never to a share: a label, a
	// command entry, the thread's notes.
	path, _, err = e.app.Store.ActivePath(ctx, e.user.ID, thread, 10)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.owner.Post(fmt.Sprintf("/m/%d/labels", path[1].ID), url.Values{"name": {"label-zulu"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("label: %d", r.StatusCode)
	}
	if r := e.owner.HTMX(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"/status"}}); r.StatusCode >= 300 {
		t.Fatalf("/status: %d", r.StatusCode)
	}
	if r := e.owner.Post(fmt.Sprintf("/t/%d/settings", thread), url.Values{"notes": {"notes-zulu"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("notes: %d %.300s", r.StatusCode, r.Body)
	}
	owned := e.owner.Get(fmt.Sprintf("/t/%d", thread)).Body
	for _, s := range []string{"label-zulu", `data-testid="command-entry"`, "notes-zulu"} {
		if !strings.Contains(owned, s) {
			t.Fatalf("the thread page lacks %s", s)
		}
	}

	_, link := e.share(thread, url.Values{"expires": {"never"}})
	e.send(thread, "charlie later")

	want := []string{"user: alpha question", "assistant: You said: alpha question", "user: bravo new", "assistant: You said: bravo new"}
	var pages []string
	for _, c := range []*testenv.Client{e.anon, e.other, e.owner} {
		r := c.Get(link)
		if r.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %.300s", link, r.StatusCode, r.Body)
		}
		if got := messagesOf(r.Body); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("the share shows %q, want %q", got, want)
		}
		for h, v := range map[string]string{"X-Robots-Tag": "noindex, nofollow", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"} {
			if got := r.Header.Get(h); got != v {
				t.Errorf("%s = %q, want %q", h, got, v)
			}
		}
		if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("the share page's CSP is %q", csp)
		}
		pages = append(pages, r.Body)
	}
	if pages[0] != pages[1] || pages[1] != pages[2] {
		t.Error("the owner, another user and an anonymous reader do not see the same page")
	}
	page := pages[0]
	if !strings.Contains(page, `<meta name="robots" content="noindex, nofollow">`) {
		t.Error("the share page has no robots meta tag")
	}
	for _, absent := range []string{"bravo old", "charlie later", `data-testid="composer"`, `class="sidebar"`, `data-testid="thread-link"`,
		`data-testid="edit"`, `data-testid="regenerate"`, `data-testid="branch-pos"`, `data-testid="fork"`, `data-testid="delete-message"`,
		`data-testid="read-aloud"`, `data-testid="share-create"`, `data-testid="run-status"`, `hx-`, "sharer@example.com", "<script>",
		"label-zulu", `data-testid="label"`, `data-testid="command-entry"`, "/status", "notes-zulu"} {
		if strings.Contains(page, absent) {
			t.Errorf("the share page contains %q", absent)
		}
	}
	for _, m := range regexp.MustCompile(`(?:href|src|action)="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[1], "/static/") && !strings.HasPrefix(m[1], link) {
			t.Errorf("the share page links to %q", m[1])
		}
	}

	// The thread page lists the link; a bad or unknown token is a 404.
	if r := e.owner.Get(fmt.Sprintf("/t/%d", thread)); !strings.Contains(r.Body, `data-testid="share-create"`) ||
		!strings.Contains(r.Body, `data-testid="share-link"`) || strings.Contains(r.Body, link) {
		t.Errorf("the thread page lacks the share control or its link, or shows the token again")
	}
	tok := strings.TrimPrefix(link, "/s/")
	for _, bad := range []string{"/s/" + strings.Repeat("A", len(tok)), "/s/short", "/s/" + tok[:len(tok)-1] + "!", link + "x"} {
		if r := e.anon.Get(bad); r.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", bad, r.StatusCode)
		}
	}
}

// A message of the shared path deleted later takes the link with it (the
// link 404s); deleting the thread deletes its links.
func TestDeletingASharedMessageOrTheThreadEndsTheLink(t *testing.T) {
	t.Parallel()
	e := newShareEnv(t)
	ctx := context.Background()
	thread := e.startThread("delta one")
	e.send(thread, "delta two")
	_, link := e.share(thread, nil)
	path, _, err := e.app.Store.ActivePath(ctx, e.user.ID, thread, 10)
	if err != nil || len(path) != 4 {
		t.Fatalf("the path: %d, %v", len(path), err)
	}
	if r := e.owner.Post(fmt.Sprintf("/m/%d/delete", path[3].ID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete the last answer: %d", r.StatusCode)
	}
	if r := e.anon.Get(link); r.StatusCode != http.StatusNotFound {
		t.Errorf("after its last message was deleted the link answers %d, want 404", r.StatusCode)
	}

	other := e.startThread("echo")
	_, link2 := e.share(other, nil)
	if r := e.anon.Get(link2); r.StatusCode != http.StatusOK {
		t.Fatalf("the second link: %d", r.StatusCode)
	}
	if r := e.owner.Post(fmt.Sprintf("/t/%d/delete", other), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete the thread: %d", r.StatusCode)
	}
	if r := e.anon.Get(link2); r.StatusCode != http.StatusNotFound {
		t.Errorf("after its thread was deleted the link answers %d, want 404", r.StatusCode)
	}
	if list, err := e.app.Store.UserShares(ctx, e.user.ID); err != nil || len(list) != 0 {
		t.Errorf("links left: %+v %v", list, err)
	}
}

// Revoking makes a link 404 at once; an expiring link opens until its
// time and 404s after it; only the owner makes or revokes links of a
// thread.
func TestRevokedAndExpiredShareLinksAre404AndOnlyTheOwnerManagesThem(t *testing.T) {
	t.Parallel()
	e := newShareEnv(t)
	ctx := context.Background()
	thread := e.startThread("foxtrot")

	for _, c := range []*testenv.Client{e.other} {
		if r := c.Post(fmt.Sprintf("/t/%d/shares", thread), nil); r.StatusCode != http.StatusNotFound {
			t.Errorf("another user made a link of my thread: %d", r.StatusCode)
		}
	}
	if r := e.anon.Post(fmt.Sprintf("/t/%d/shares", thread), nil); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/login" {
		t.Errorf("an anonymous visitor's share: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	if r := e.owner.Post(fmt.Sprintf("/t/%d/shares", thread), url.Values{"expires": {"2d"}}); r.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown expiry: %d", r.StatusCode)
	}

	day, dayLink := e.share(thread, url.Values{"expires": {"1d"}})
	kept, keptLink := e.share(thread, url.Values{"expires": {"never"}})
	if r := e.anon.Get(dayLink); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "This link expires on") {
		t.Fatalf("a day's link at once: %d", r.StatusCode)
	}
	e.clock.Add(int64(24*time.Hour - time.Second))
	if r := e.anon.Get(dayLink); r.StatusCode != http.StatusOK {
		t.Errorf("a day's link a second before it expires: %d", r.StatusCode)
	}
	e.clock.Add(int64(2 * time.Second))
	if r := e.anon.Get(dayLink); r.StatusCode != http.StatusNotFound {
		t.Errorf("a day's link after a day: %d, want 404", r.StatusCode)
	}
	if r := e.owner.Get("/shares"); !strings.Contains(r.Body, fmt.Sprintf(`data-share-id="%d" data-expired="true"`, day)) {
		t.Errorf("/shares does not show the link as expired")
	}

	// Another user cannot revoke it; the owner can, and it 404s at once.
	if r := e.other.Post(fmt.Sprintf("/shares/%d/revoke", kept), nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("another user revoking my link: %d, want 404", r.StatusCode)
	}
	if r := e.anon.Get(keptLink); r.StatusCode != http.StatusOK {
		t.Fatalf("the link after another user's revoke: %d", r.StatusCode)
	}
	r := e.owner.HTMX(fmt.Sprintf("/shares/%d/revoke", kept), nil)
	if r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `id="share-panel"`) || strings.Contains(r.Body, fmt.Sprintf(`data-share-id="%d"`, kept)) {
		t.Errorf("revoke (htmx): %d %.300s", r.StatusCode, r.Body)
	}
	if r := e.anon.Get(keptLink); r.StatusCode != http.StatusNotFound {
		t.Errorf("a revoked link: %d, want 404", r.StatusCode)
	}
	if r := e.owner.Post(fmt.Sprintf("/shares/%d/revoke", day), url.Values{"from": {"shares"}}); r.StatusCode != http.StatusSeeOther ||
		r.Header.Get("Location") != "/shares" {
		t.Errorf("revoke from /shares: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	if list, err := e.app.Store.ThreadShares(ctx, e.user.ID, thread); err != nil || len(list) != 0 {
		t.Errorf("links left: %+v %v", list, err)
	}
}

// Attachments and generated media are neither shown nor reachable through
// a link unless its owner included them; when included they are served
// through the link's own URLs, only for messages on the shared path.
func TestAShareLinkServesFilesOnlyWhenIncludedAndOnlyFromItsPath(t *testing.T) {
	t.Parallel()
	e := newShareEnv(t)
	ctx := context.Background()
	thread := e.startThread("golf")
	if r := sendFiles(t, e.owner, fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"read my notes"}},
		map[string][]byte{"notes.txt": []byte("hotel india juliet")}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("send a file: %d %.300s", r.StatusCode, r.Body)
	}
	waitIdle(t, e.app.Store, e.user.ID, thread)
	path, _, err := e.app.Store.ActivePath(ctx, e.user.ID, thread, 10)
	if err != nil || len(path) != 4 {
		t.Fatalf("the path: %d %v", len(path), err)
	}
	atts, err := e.app.Store.Attachments(ctx, e.user.ID, []int64{path[2].ID})
	if err != nil || len(atts[path[2].ID]) != 1 {
		t.Fatalf("attachments: %v %v", atts, err)
	}
	att := atts[path[2].ID][0]
	pic, err := e.app.Media.Accept(ctx, []media.Upload{{Name: "dot.png", Data: testPNG(t, 40, 30)}})
	if err != nil {
		t.Fatal(err)
	}
	md, err := e.app.Store.AddMedia(ctx, e.user.ID, path[3].ID, db.MediaImage, "a dot", "openai", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.app.Store.FinishMedia(ctx, md.ID, &db.MediaReadyInfo{SHA256: pic[0].SHA256, MIME: "image/png", ThumbSHA: pic[0].ThumbSHA, Size: pic[0].Size}, ""); err != nil {
		t.Fatal(err)
	}
	// A file on another branch of the same thread, and one in another thread.
	if r := e.owner.Post(fmt.Sprintf("/m/%d/edit", path[2].ID), url.Values{"content": {"no notes"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit: %d", r.StatusCode)
	}
	waitIdle(t, e.app.Store, e.user.ID, thread)
	if _, err := e.app.Store.SelectBranch(ctx, e.user.ID, path[2].ID); err != nil { // back to the branch with the file
		t.Fatal(err)
	}
	elsewhere := e.startThread("kilo")
	if r := sendFiles(t, e.owner, fmt.Sprintf("/t/%d/messages", elsewhere), url.Values{"content": {"more notes"}},
		map[string][]byte{"other.txt": []byte("lima mike")}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("send another file: %d", r.StatusCode)
	}
	waitIdle(t, e.app.Store, e.user.ID, elsewhere)
	foreign := latestAttachment(t, e.app.Store, e.user.ID, elsewhere)

	attURL := func(link string, id int64) string { return fmt.Sprintf("%s/attachments/%d", link, id) }
	mediaURL := func(link string, id int64) string { return fmt.Sprintf("%s/media/%d", link, id) }

	_, bare := e.share(thread, nil)
	page := e.anon.Get(bare).Body
	if got := messagesOf(page); len(got) != 4 || got[2] != "user: read my notes" {
		t.Fatalf("the share without files shows %q", got)
	}
	for _, absent := range []string{`data-testid="attachment"`, `data-testid="media"`, "/attachments/", "/media/"} {
		if strings.Contains(page, absent) {
			t.Errorf("a share without files shows %q", absent)
		}
	}
	for _, p := range []string{attURL(bare, att.ID), mediaURL(bare, md.ID), mediaURL(bare, md.ID) + "/thumb"} {
		if r := e.anon.Get(p); r.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s without files = %d, want 404", p, r.StatusCode)
		}
	}

	_, full := e.share(thread, url.Values{"files": {"on"}, "expires": {"7d"}})
	page = e.anon.Get(full).Body
	for _, want := range []string{attURL(full, att.ID), mediaURL(full, md.ID) + "/thumb", "notes.txt"} {
		if !strings.Contains(page, want) {
			t.Errorf("a share with files lacks %q", want)
		}
	}
	if strings.Contains(page, `href="/attachments/`) || strings.Contains(page, `src="/media/`) {
		t.Error("a share with files points at the owner's file routes")
	}
	for p, want := range map[string]string{attURL(full, att.ID): "hotel india juliet", mediaURL(full, md.ID) + "/thumb": "\x89PNG", mediaURL(full, md.ID): "\x89PNG"} {
		r := e.other.Get(p)
		if r.StatusCode != http.StatusOK || !strings.HasPrefix(r.Body, want) {
			t.Errorf("GET %s = %d %.20q", p, r.StatusCode, r.Body)
			continue
		}
		if r.Header.Get("Cache-Control") != "no-store" || r.Header.Get("X-Robots-Tag") != "noindex, nofollow" ||
			!strings.Contains(r.Header.Get("Content-Security-Policy"), "sandbox") {
			t.Errorf("GET %s headers: %v", p, r.Header)
		}
	}
	if r := e.owner.Get(fmt.Sprintf("/attachments/%d", att.ID)); r.Header.Get("Cache-Control") != "private, max-age=86400" {
		t.Errorf("the owner's own file route changed its caching: %q", r.Header.Get("Cache-Control"))
	}
	// Other attachments of the owner stay out of reach, even with a valid token.
	branchAtt := latestAttachment(t, e.app.Store, e.user.ID, thread)
	if branchAtt == att.ID {
		t.Fatal("the edit did not copy the attachment to its new version")
	}
	for _, id := range []int64{foreign, branchAtt} {
		if r := e.anon.Get(attURL(full, id)); r.StatusCode != http.StatusNotFound {
			t.Errorf("an attachment off the shared path (%d) = %d, want 404", id, r.StatusCode)
		}
	}
}

// latestAttachment is the newest attachment of a thread.
func latestAttachment(t *testing.T, store *db.DB, user, thread int64) int64 {
	t.Helper()
	var id int64
	if err := store.Pool.QueryRow(context.Background(), `SELECT max(a.id) FROM attachments a JOIN messages m ON m.id = a.message_id
		WHERE m.thread_id = $1 AND a.owner_id = $2`, thread, user).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// Sharing from the thread page (htmx) answers with the thread's share panel
// holding the new URL, never cached; a thread with no message left has
// nothing to share and says so.
func TestSharingFromTheThreadPageAnswersWithThePanelAndTheURL(t *testing.T) {
	t.Parallel()
	e := newShareEnv(t)
	ctx := context.Background()
	thread := e.startThread("papa")
	r := e.owner.HTMX(fmt.Sprintf("/t/%d/shares", thread), url.Values{"expires": {"30d"}, "files": {"on"}})
	if r.StatusCode != http.StatusOK || strings.Contains(r.Body, "<html") || !strings.Contains(r.Body, `id="share-panel"`) ||
		!shareURLRe.MatchString(r.Body) || !strings.Contains(r.Body, "with files") {
		t.Fatalf("share (htmx): %d %.500s", r.StatusCode, r.Body)
	}
	if got := r.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("the answer holding a new link is cached: %q", got)
	}
	list, err := e.app.Store.ThreadShares(ctx, e.user.ID, thread)
	if err != nil || len(list) != 1 || !list[0].IncludeFiles || list[0].ExpiresAt == nil ||
		(list[0].ExpiresAt.Sub(time.Unix(0, e.clock.Load()))-30*24*time.Hour).Abs() > time.Millisecond {
		t.Fatalf("the link stored: %+v %v", list, err)
	}

	path, _, err := e.app.Store.ActivePath(ctx, e.user.ID, thread, 10)
	if err != nil || len(path) != 2 {
		t.Fatalf("the path: %d %v", len(path), err)
	}
	if r := e.owner.Post(fmt.Sprintf("/m/%d/delete", path[0].ID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete the first message: %d", r.StatusCode)
	}
	r = e.owner.HTMX(fmt.Sprintf("/t/%d/shares", thread), nil)
	if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, `data-testid="error"`) ||
		!strings.Contains(r.Body, "no messages to share") {
		t.Errorf("sharing an empty thread: %d %.500s", r.StatusCode, r.Body)
	}
}

// On a page showing another branch than the saved one (?at=, from a search
// result), the panel says plainly — not only in the folded options — that a
// link shows the saved branch, not the one being read.
func TestSharingFromAnotherBranchSaysPlainlyWhichBranchALinkShows(t *testing.T) {
	t.Parallel()
	e := newShareEnv(t)
	ctx := context.Background()
	thread := e.startThread("romeo")
	e.send(thread, "sierra old")
	path, _, err := e.app.Store.ActivePath(ctx, e.user.ID, thread, 10)
	if err != nil || len(path) != 4 {
		t.Fatalf("the path: %d messages, %v", len(path), err)
	}
	if r := e.owner.Post(fmt.Sprintf("/m/%d/edit", path[2].ID), url.Values{"content": {"sierra new"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit: %d", r.StatusCode)
	}
	waitIdle(t, e.app.Store, e.user.ID, thread)

	panel := regexp.MustCompile(`(?s)<div id="share-panel".*?</form>.*?(?:<details class="share-links"|</div>)`)
	options := regexp.MustCompile(`(?s)<details class="share-options">.*?</details>`)
	note := "the branch you last chose"
	other := e.owner.Get(fmt.Sprintf("/t/%d?at=%d", thread, path[2].ID))
	if !strings.Contains(other.Body, "sierra old") || !strings.Contains(other.Body, `data-testid="other-branch"`) {
		t.Fatalf("the page does not show the other branch: %d", other.StatusCode)
	}
	if p := options.ReplaceAllString(panel.FindString(other.Body), ""); !strings.Contains(p, note) {
		t.Errorf("on another branch the share panel says which branch a link shows only in its folded options: %s", panel.FindString(other.Body))
	}
	if p := panel.FindString(e.owner.Get(fmt.Sprintf("/t/%d", thread)).Body); p == "" || strings.Contains(p, note) {
		t.Errorf("on the saved branch the share panel is %q", p)
	}
}
