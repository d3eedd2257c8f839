package handlers_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"mime/multipart"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"weft/db"
	"weft/importer"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// importFile posts a file to /import (the workspace field first, as the
// form sends it; workspace 0: the field left out).
func importFile(t *testing.T, c *testenv.Client, workspace int64, name string, data []byte) testenv.Response {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if workspace != 0 {
		_ = mw.WriteField("workspace_id", fmt.Sprint(workspace))
	}
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(data)
	mw.Close()
	req, err := http.NewRequest("POST", c.Base+"/import", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return c.Send(req)
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("../importer/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// importStarted reads the import id from the redirect to its page.
func importStarted(t *testing.T, r testenv.Response) int64 {
	t.Helper()
	var id int64
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("upload = %d, want 303: %s", r.StatusCode, r.Body)
	}
	if _, err := fmt.Sscanf(r.Header.Get("Location"), "/imports/%d", &id); err != nil {
		t.Fatalf("redirected to %q, not an import's page", r.Header.Get("Location"))
	}
	return id
}

// waitImport waits until the import's job has ended.
func waitImport(t *testing.T, store *db.DB, user, id int64) db.Import {
	t.Helper()
	var imp db.Import
	testwait.For(t, "the import to end", 60*time.Second, func() bool {
		var err error
		if imp, err = store.UserImport(context.Background(), user, id); err != nil {
			t.Fatal(err)
		}
		return imp.Finished()
	})
	return imp
}

// importUser starts Weft with o and signs a user up.
func importUser(t *testing.T, o testenv.Options) (*testenv.App, *testenv.Client, db.User, db.Workspace) {
	t.Helper()
	app := testenv.Start(t, testenv.NewDB(t), o)
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("importer@example.com", password)
	u, err := app.Store.UserByEmail(context.Background(), "importer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	wss, err := app.Store.Workspaces(context.Background(), u.ID)
	if err != nil || len(wss) == 0 {
		t.Fatalf("workspaces %v %v", wss, err)
	}
	return app, c, u, wss[0]
}

var (
	msgBlock  = regexp.MustCompile(`data-testid="message" [^>]*data-role="(\w+)"`)
	branchPos = regexp.MustCompile(`data-testid="branch-pos">(\d+)/(\d+)<`)
	bodyText  = regexp.MustCompile(`(?s)data-testid="message-body"[^>]*>(.*?)</div>`)
	tags      = regexp.MustCompile(`<[^>]+>`)
)

// visible is each message of a thread page: "role: text [pos]".
func visible(html string) []string {
	locs := msgBlock.FindAllStringSubmatchIndex(html, -1)
	var out []string
	for i, l := range locs {
		end := len(html)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		block := html[l[0]:end]
		role := html[l[2]:l[3]]
		text := ""
		if m := bodyText.FindStringSubmatch(block); m != nil {
			text = strings.Join(strings.Fields(tags.ReplaceAllString(m[1], " ")), " ")
		}
		line := role + ": " + text
		if m := branchPos.FindStringSubmatch(block); m != nil {
			line += " [" + m[1] + "/" + m[2] + "]"
		}
		out = append(out, line)
	}
	return out
}

// importedThreads maps the titles of an import's threads to their ids.
func importedThreads(t *testing.T, store *db.DB, user, id int64) map[string]int64 {
	t.Helper()
	items, err := store.ImportItems(context.Background(), user, id, 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, it := range items {
		if it.ThreadID != nil {
			out[it.Title] = *it.ThreadID
		}
	}
	return out
}

func TestAChatGPTExportBecomesThreadsWithTheirBranchesAndAReport(t *testing.T) {
	t.Parallel()
	app, c, u, ws := importUser(t, testenv.Options{})
	id := importStarted(t, importFile(t, c, ws.ID, "conversations.json", fixture(t, "chatgpt_conversations.json")))
	imp := waitImport(t, app.Store, u.ID, id)
	if imp.Status != db.ImportDone || imp.Imported != 3 || imp.Skipped != 1 || imp.Total == nil || *imp.Total != 4 {
		t.Fatalf("import %+v", imp)
	}
	if imp.Messages != 12 || imp.MessagesSkipped != 10 || imp.PartsSkipped != 2 {
		t.Errorf("%d messages imported, %d left out, %d parts left out; want 12, 10, 2", imp.Messages, imp.MessagesSkipped, imp.PartsSkipped)
	}

	r := c.Get(fmt.Sprintf("/imports/%d", id))
	if r.StatusCode != 200 || !strings.Contains(r.Body, `data-testid="import-report"`) {
		t.Fatalf("report page = %d:\n%s", r.StatusCode, r.Body)
	}
	if n := strings.Count(r.Body, `data-testid="import-item" data-status="imported"`); n != 3 {
		t.Errorf("%d imported conversations listed, want 3", n)
	}
	if n := strings.Count(r.Body, `data-testid="import-item" data-status="skipped"`); n != 1 ||
		!strings.Contains(r.Body, "New chat") || !strings.Contains(r.Body, "it has no messages with text") {
		t.Errorf("the skipped conversation and its reason are not listed:\n%s", r.Body)
	}

	threads := importedThreads(t, app.Store, u.ID, id)
	tea := threads["Steeping tea ☕ お茶"]
	if tea == 0 || threads["Primes in Python"] == 0 || threads["Заметки — short"] == 0 {
		t.Fatalf("threads %v", threads)
	}
	if !strings.Contains(r.Body, fmt.Sprintf(`href="/t/%d"`, tea)) {
		t.Error("the report does not link the thread")
	}
	// The visible path is ChatGPT's current one: the edited question (2 of
	// 2 versions), the regenerated answer (2 of 2), the picture's question
	// and the answer that hung under a hidden tool node.
	page := c.Get(fmt.Sprintf("/t/%d", tea))
	want := []string{
		"user: How long should I steep sencha at 70 °C? [2/2]",
		"assistant: Steep sencha for 60–90 seconds; a second infusion needs less. [2/2]",
		"user: [image not imported] Which tea is this?",
		"assistant: That looks like gyokuro 🍵.",
	}
	if got := visible(page.Body); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the thread shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	th, err := app.Store.Thread(context.Background(), u.ID, tea)
	if err != nil {
		t.Fatal(err)
	}
	if th.WorkspaceID != ws.ID || !th.CreatedAt.Equal(time.Unix(1717171717, 123456000)) || !th.UpdatedAt.Equal(time.Unix(1717172717, 5e8)) {
		t.Errorf("thread %d in workspace %d, created %v, updated %v", th.ID, th.WorkspaceID, th.CreatedAt, th.UpdatedAt)
	}
	tree, err := app.Store.TreeMessages(context.Background(), u.ID, tea)
	if err != nil || len(tree) != 7 {
		t.Fatalf("%d messages in the tree, want 7 (%v)", len(tree), err)
	}
	if tree[4].Metadata.Model != "gpt-4o-mini" {
		t.Errorf("the regenerated answer's model is %q", tree[4].Metadata.Model)
	}
	// The first version of the question is one click away.
	if r := c.Post(fmt.Sprintf("/m/%d/select", tree[0].ID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("select = %d", r.StatusCode)
	}
	if got := visible(c.Get(fmt.Sprintf("/t/%d", tea)).Body); len(got) != 2 || got[0] != "user: How long should I steep green tea? [1/2]" {
		t.Errorf("the other branch shows %q", got)
	}
}

func TestAnOpenWebUIExportBecomesThreadsAndTheBrokenChatIsReported(t *testing.T) {
	t.Parallel()
	app, c, u, ws := importUser(t, testenv.Options{})
	id := importStarted(t, importFile(t, c, 0, "chat-export-1720000000.json", fixture(t, "openwebui_export.json")))
	imp := waitImport(t, app.Store, u.ID, id)
	if imp.Status != db.ImportDone || imp.Imported != 2 || imp.Skipped != 1 || imp.WorkspaceID != ws.ID {
		t.Fatalf("import %+v", imp)
	}
	threads := importedThreads(t, app.Store, u.ID, id)
	llama := threads["🦙 Llama or qwen?"]
	if llama == 0 || threads["Größe der Erde"] == 0 {
		t.Fatalf("threads %v", threads)
	}
	want := []string{
		"user: Which model should I use for summaries? [1/2]",
		"assistant: Try qwen2.5:7b — it follows instructions closely. [2/2]",
		"user: Summarise the attached PDF. [attachment not imported]",
		"assistant: The report says revenue grew 12 % in Q2.",
	}
	if got := visible(c.Get(fmt.Sprintf("/t/%d", llama)).Body); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the thread shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	r := c.Get(fmt.Sprintf("/imports/%d", id))
	if !strings.Contains(r.Body, "Broken") || !strings.Contains(r.Body, "not shaped like an Open WebUI conversation") {
		t.Errorf("the broken chat is not reported:\n%s", r.Body)
	}
}

func TestFilesThatAreNoExportAreRefusedAtOnceWithAReason(t *testing.T) {
	t.Parallel()
	app, c, u, _ := importUser(t, testenv.Options{Import: importer.Limits{MaxBytes: 64 << 10}})
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"notes.txt", []byte("hello"), "not an export Weft can import"},
		{"conversations.json", []byte("[]"), "holds no conversations"},
		{"export.zip", []byte("PK\x03\x04 zipped"), ".zip cannot be read"},
		{"big.json", []byte(`[{"mapping":{},"title":"` + strings.Repeat("x", 100<<10) + `"}]`), "too large: exports up to 64 KB"},
		{"huge.json", []byte(`[{"mapping":{},"title":"` + strings.Repeat("x", 2<<20) + `"}]`), "too large"},
		{"thread.json", []byte(`{"format":"weft-thread","version":1,"title":"` + strings.Repeat("x", 20<<20+100<<10) + `"}`), "too large: Weft thread exports up to 20 MB"},
	} {
		r := importFile(t, c, 0, tc.name, tc.data)
		if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, tc.want) || !strings.Contains(r.Body, `data-testid="error"`) {
			t.Errorf("%s: %d, want 422 saying %q:\n%.2000s", tc.name, r.StatusCode, tc.want, r.Body)
		}
	}
	if imps, err := app.Store.Imports(context.Background(), u.ID, 10); err != nil || len(imps) != 0 {
		t.Errorf("imports stored: %v %v", imps, err)
	}
}

func TestHostileExportsImportWhatCanBeAndSayWhyNot(t *testing.T) {
	t.Parallel()
	app, c, u, _ := importUser(t, testenv.Options{Import: importer.Limits{MaxConversationBytes: 256 << 10}})
	ok := func(title string) string {
		return `{"title":"` + title + `","mapping":{"a":{"id":"a","message":{"author":{"role":"user"},"content":{"content_type":"text","parts":["hi"]}}}}}`
	}
	deep := strings.Repeat("[", 50_000) + strings.Repeat("]", 50_000)
	loop := `{"title":"loop","mapping":{"a":{"id":"a","parent":"b","message":{"author":{"role":"user"},"content":{"parts":["x"]}}},` +
		`"b":{"id":"b","parent":"a","message":{"author":{"role":"user"},"content":{"parts":["y"]}}}}}`
	file := `[` + strings.Join([]string{
		ok("first"),
		`{"title":"deep","mapping":` + deep + `}`,
		`{"title":"huge","mapping":{"a":{"message":{"content":{"parts":["` + strings.Repeat("é", 200<<10) + `"]}}}}}`,
		`{"title":["wrong"],"mapping":{}}`,
		loop,
		`{"title":"nul \u0000 here","mapping":{"a":{"id":"a","message":{"author":{"role":"user"},"content":{"parts":["a\u0000b \ud800"]}}}}}`,
		ok("last"),
	}, ",") + `]`
	id := importStarted(t, importFile(t, c, 0, "conversations.json", []byte(file)))
	imp := waitImport(t, app.Store, u.ID, id)
	if imp.Status != db.ImportDone || imp.Imported != 3 || imp.Skipped != 4 {
		t.Fatalf("import %+v", imp)
	}
	items, err := app.Store.ImportItems(context.Background(), u.ID, id, 100)
	if err != nil {
		t.Fatal(err)
	}
	notes := map[int]string{}
	for _, it := range items {
		notes[it.Position] = it.Note
	}
	for pos, want := range map[int]string{
		1: "nested more than 64 levels", 2: "larger than 256 KB", 3: "“title” has the wrong type", 4: "it has no messages with text",
	} {
		if !strings.Contains(notes[pos], want) {
			t.Errorf("conversation %d: %q, want %q", pos+1, notes[pos], want)
		}
	}
	// A truncated file imports nothing at all: it is counted first.
	id = importStarted(t, importFile(t, c, 0, "conversations.json", []byte(`[`+ok("a")+`,`+ok("b")+`,{"title":"c","mapping":{`)))
	imp = waitImport(t, app.Store, u.ID, id)
	if imp.Status != db.ImportFailed || imp.Imported != 0 || !strings.Contains(imp.Error, "Nothing was imported: the file ends in the middle of conversation 3") {
		t.Errorf("truncated: %+v", imp)
	}
	r := c.Get(fmt.Sprintf("/imports/%d", id))
	if !strings.Contains(r.Body, "Nothing was imported") || !strings.Contains(r.Body, `data-status="failed"`) {
		t.Errorf("the failure is not shown:\n%s", r.Body)
	}
}

func TestAnImportResumesAcrossAttemptsWithoutImportingTwice(t *testing.T) {
	t.Parallel()
	// Every attempt hands over after one conversation, as after a restart:
	// the next reads the file from the start and goes on from next_index.
	app, c, u, _ := importUser(t, testenv.Options{Import: importer.Limits{AttemptTime: time.Nanosecond}})
	id := importStarted(t, importFile(t, c, 0, "conversations.json", fixture(t, "chatgpt_conversations.json")))
	imp := waitImport(t, app.Store, u.ID, id)
	if imp.Imported != 3 || imp.Skipped != 1 || imp.NextIndex != 4 {
		t.Fatalf("import %+v", imp)
	}
	page, _, err := app.Store.SidebarThreads(context.Background(), u.ID, imp.WorkspaceID, nil, 100)
	if err != nil || len(page) != 3 {
		t.Fatalf("%d threads in the sidebar, want 3 (%v)", len(page), err)
	}
	// An attempt that lost the race for a conversation stores nothing.
	err = app.Store.RecordImport(context.Background(), id, db.ImportOutcome{Position: 1, Title: "again",
		Thread: &db.ImportedThread{Title: "again", Messages: []db.ImportedMessage{{Parent: -1, Role: "user", Content: "x", Status: db.MsgComplete}}}})
	if !errors.Is(err, db.ErrImportMoved) {
		t.Errorf("a conversation imported twice: %v", err)
	}
	if page, _, _ = app.Store.SidebarThreads(context.Background(), u.ID, imp.WorkspaceID, nil, 100); len(page) != 3 {
		t.Errorf("%d threads after a stale attempt", len(page))
	}
}

func TestAnotherUsersImportIsNotFoundAndWorkspacesAreTheUsersOwn(t *testing.T) {
	t.Parallel()
	app, c, u, _ := importUser(t, testenv.Options{})
	id := importStarted(t, importFile(t, c, 0, "conversations.json", fixture(t, "chatgpt_conversations.json")))
	other := testenv.NewClient(t, app.TS.URL)
	other.Register("other@example.com", password)
	for _, p := range []string{fmt.Sprintf("/imports/%d", id), fmt.Sprintf("/imports/%d/progress", id)} {
		if r := other.Get(p); r.StatusCode != http.StatusNotFound {
			t.Errorf("another user's %s = %d", p, r.StatusCode)
		}
	}
	ou, err := app.Store.UserByEmail(context.Background(), "other@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ows, err := app.Store.Workspaces(context.Background(), ou.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r := importFile(t, c, ows[0].ID, "conversations.json", fixture(t, "chatgpt_conversations.json")); r.StatusCode != http.StatusNotFound {
		t.Errorf("import into another user's workspace = %d", r.StatusCode)
	}
	waitImport(t, app.Store, u.ID, id)
}

// largeExport is a ChatGPT export of n conversations of four messages.
func largeExport(n int) []byte {
	var b bytes.Buffer
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"title":"Conversation %d","create_time":%d,"mapping":{`, i, 1700000000+i)
		for j := range 4 {
			role := []string{"user", "assistant"}[j%2]
			parent := "null"
			if j > 0 {
				parent = fmt.Sprintf(`"c%d-%d"`, i, j-1)
			}
			fmt.Fprintf(&b, `"c%d-%d":{"id":"c%d-%d","parent":%s,"children":[],"message":{"author":{"role":%q},`+
				`"content":{"content_type":"text","parts":["message %d of conversation %d %s"]}}}`,
				i, j, i, j, parent, role, j, i, strings.Repeat("lorem ipsum ", 40))
			if j < 3 {
				b.WriteString(",")
			}
		}
		fmt.Fprintf(&b, `},"current_node":"c%d-3"}`, i)
	}
	b.WriteString("]")
	return b.Bytes()
}

func TestALargeExportImportsWithVisibleProgressAndBoundedMemory(t *testing.T) {
	// Not parallel: the heap measured is the whole test process's, and the
	// package's parallel tests (3 MB thread pages, pathological imports)
	// took it past the bound in a full run (241 MB) while this import
	// alone stays under it.
	const n = 2500
	app, c, u, _ := importUser(t, testenv.Options{})
	data := largeExport(n)
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
		}
	}()
	id := importStarted(t, importFile(t, c, 0, "conversations.json", data))
	// Progress shows on the page while the job runs.
	sawProgress := false
	var imp db.Import
	testwait.For(t, "the large import to end", 5*time.Minute, func() bool {
		r := c.Get(fmt.Sprintf("/imports/%d/progress", id))
		if strings.Contains(r.Body, `data-status="running"`) && strings.Contains(r.Body, fmt.Sprintf(`<progress max="%d" value="`, n)) &&
			!strings.Contains(r.Body, fmt.Sprintf(`value="%d"`, n)) && strings.Contains(r.Body, `hx-trigger="load delay:1s"`) &&
			strings.Contains(r.Body, `data-testid="import-stop"`) {
			sawProgress = true
		}
		var err error
		imp, err = app.Store.UserImport(context.Background(), u.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		return imp.Finished()
	})
	close(stop)
	<-done
	if imp.Status != db.ImportDone || imp.Imported != n || imp.Messages != 4*n {
		t.Fatalf("import %+v", imp)
	}
	if !sawProgress {
		t.Error("the progress fragment never showed the import part-way")
	}
	// The file is len(data) bytes; the whole test process (server, job,
	// client) stays within a few times one chunk and one conversation.
	if p := peak.Load(); p > 200<<20 {
		t.Errorf("peak heap %d MB for a %d MB file", p>>20, len(data)>>20)
	}
	var chunks int
	if err := app.Store.Pool.QueryRow(context.Background(), "SELECT count(*) FROM import_chunks WHERE import_id = $1", id).Scan(&chunks); err != nil || chunks != 0 {
		t.Errorf("%d chunks of the file left after the import (%v)", chunks, err)
	}
}

// zipOf is a .zip of name → content.
func zipOf(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, data := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestChatGPTsZipExportImportsAndHostileZipsAreRefused(t *testing.T) {
	t.Parallel()
	app, c, u, _ := importUser(t, testenv.Options{Import: importer.Limits{MaxBytes: 256 << 10}})
	export := zipOf(t, map[string][]byte{
		"conversations.json":       fixture(t, "chatgpt_conversations.json"),
		"chat.html":                []byte("<html>the same, as a page</html>"),
		"user.json":                []byte(`{"id":"user-1","email":"me@example.com"}`),
		"file-Xyz-tea.jpg":         {0xff, 0xd8, 0xff, 0xe0},
		"dalle-generations/a.webp": []byte("RIFF"),
	})
	id := importStarted(t, importFile(t, c, 0, "export-2026-12-05.zip", export))
	if imp := waitImport(t, app.Store, u.ID, id); imp.Status != db.ImportDone || imp.Imported != 3 || imp.Skipped != 1 {
		t.Fatalf("import %+v", imp)
	}

	many := map[string][]byte{"conversations.json": []byte(`[]`)}
	for i := range importer.MaxZipEntries {
		many[fmt.Sprint("f", i)] = nil
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		// 8 MB of one byte compresses to a few KB: only the cap is read.
		{"bomb.zip", zipOf(t, map[string][]byte{"conversations.json": append([]byte(`[{"mapping":{},"title":"`), bytes.Repeat([]byte("a"), 8<<20)...)}), "too large: exports up to 256 KB"},
		{"photos.zip", zipOf(t, map[string][]byte{"a.jpg": {0xff, 0xd8}}), "holds no conversations.json"},
		{"many.zip", zipOf(t, many), "too many entries"},
		{"cut.zip", export[:len(export)/2], "cannot be read"},
		{"other.zip", zipOf(t, map[string][]byte{"conversations.json": []byte(`{"hello":"world"}`)}), "not an export Weft can import"},
	} {
		r := importFile(t, c, 0, tc.name, tc.data)
		if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, tc.want) {
			t.Errorf("%s: %d, want 422 saying %q:\n%.3000s", tc.name, r.StatusCode, tc.want, r.Body)
		}
	}
	if imps, err := app.Store.Imports(context.Background(), u.ID, 10); err != nil || len(imps) != 1 {
		t.Errorf("imports stored: %d %v", len(imps), err)
	}
}

// rawZip is a .zip of one stored conversations.json whose header says the
// given checksum and size, whatever the data.
func rawZip(t *testing.T, data []byte, crc uint32, size uint64) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "conversations.json", Method: zip.Store, CRC32: crc,
		CompressedSize64: uint64(len(data)), UncompressedSize64: size})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// An archive whose conversations.json is not what its header says — a
// wrong checksum, a size that lies — is refused like any broken .zip (it
// was a 500), and nothing is stored.
func TestAZipWhoseEntryIsNotWhatItSaysIsRefused(t *testing.T) {
	t.Parallel()
	app, c, u, _ := importUser(t, testenv.Options{})
	data := fixture(t, "chatgpt_conversations.json")
	sum := crc32.ChecksumIEEE(data)
	for name, z := range map[string][]byte{
		"checksum.zip": rawZip(t, data, sum+1, uint64(len(data))),
		"longer.zip":   rawZip(t, data, sum, uint64(len(data))+10),
		"shorter.zip":  rawZip(t, data, sum, uint64(len(data))-10),
	} {
		r := importFile(t, c, 0, name, z)
		if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "cannot be read") {
			t.Errorf("%s: %d, want 422 saying it cannot be read:\n%.3000s", name, r.StatusCode, r.Body)
		}
	}
	if imps, err := app.Store.Imports(context.Background(), u.ID, 10); err != nil || len(imps) != 0 {
		t.Errorf("imports stored: %d %v", len(imps), err)
	}
}
