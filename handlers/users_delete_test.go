package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"weft/db"
	"weft/internal/testenv"
	"weft/media"
)

// userColumn is a column that may hold a user's id: a foreign key to
// users, or a column named like one that has none (kb_chunks.owner_id).
type userColumn struct{ Table, Column string }

// userColumns finds every such column of the schema, so the check below
// follows new tables without being edited.
func userColumns(t *testing.T, store *db.DB) []userColumn {
	t.Helper()
	rows, err := store.Pool.Query(context.Background(), `
		SELECT kcu.table_name::text, kcu.column_name::text
		FROM information_schema.table_constraints tc
		JOIN information_schema.key_column_usage kcu
			ON kcu.constraint_name = tc.constraint_name AND kcu.table_schema = tc.table_schema
		JOIN information_schema.constraint_column_usage ccu
			ON ccu.constraint_name = tc.constraint_name AND ccu.table_schema = tc.table_schema
		WHERE tc.constraint_type = 'FOREIGN KEY' AND tc.table_schema = 'public' AND ccu.table_name = 'users'
		UNION
		SELECT c.table_name::text, c.column_name::text FROM information_schema.columns c
		JOIN information_schema.tables tb ON tb.table_name = c.table_name AND tb.table_schema = c.table_schema
		WHERE c.table_schema = 'public' AND tb.table_type = 'BASE TABLE'
			AND c.column_name IN ('owner_id', 'user_id', 'created_by', 'used_by')
		ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowToStructByPos[userColumn])
	if err != nil {
		t.Fatal(err)
	}
	if len(cols) < 15 {
		t.Fatalf("only %d user columns found: %v", len(cols), cols)
	}
	return cols
}

// rowsOf counts, per column, the rows that hold user.
func rowsOf(t *testing.T, store *db.DB, cols []userColumn, user int64) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, c := range cols {
		var n int
		q := fmt.Sprintf("SELECT count(*) FROM %s WHERE %s = $1", pgx.Identifier{c.Table}.Sanitize(), pgx.Identifier{c.Column}.Sanitize())
		if err := store.Pool.QueryRow(context.Background(), q, user).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			out[c.Table+"."+c.Column] = n
		}
	}
	return out
}

func TestDeletingAUserRemovesEveryRowOfTheirsAfterTheTypedEmail(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	app := testenv.Start(t, store, testenv.Options{})
	admin := testenv.NewClient(t, app.TS.URL)
	admin.Register("admin@example.com", password)
	adminUser, _ := store.UserByEmail(ctx, "admin@example.com")

	// The member signs up with an invite, becomes an administrator and
	// makes an invite and a reset link of their own: every kind of row
	// that names an account exists for them.
	admin.Post("/admin/signup", url.Values{"mode": {"invite"}})
	_, token := makeInvite(t, admin, nil)
	member := testenv.NewClient(t, app.TS.URL)
	if r := member.Post("/register", url.Values{"email": {"doomed@example.com"}, "password": {password}, "invite": {token}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("register = %d", r.StatusCode)
	}
	m, _ := store.UserByEmail(ctx, "doomed@example.com")
	if r := admin.Post(userPath(m.ID, "role"), url.Values{"role": {"admin"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("make admin = %d", r.StatusCode)
	}
	makeInvite(t, member, nil)
	member.Post(userPath(adminUser.ID, "reset-link"), nil)
	member.Post(userPath(m.ID, "reset-link"), nil)

	ws := regexpFind(t, `name="workspace_id" value="(\d+)"`, member.Get("/").Body)
	if r := member.Post("/t", url.Values{"workspace_id": {ws}, "content": {"hello"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("send = %d", r.StatusCode)
	}
	var wsID int64
	fmt.Sscan(ws, &wsID)
	page, _, err := store.SidebarThreads(ctx, m.ID, wsID, nil, 1)
	if err != nil || len(page) != 1 {
		t.Fatalf("thread: %v %v", page, err)
	}
	run := waitIdle(t, store, m.ID, page[0].ID)
	if _, err := store.AddStep(ctx, run.ID, db.StepApproval, db.StepPending, db.StepData{Tool: "write_file"}, nil); err != nil {
		t.Fatal(err)
	}
	files, err := app.Media.Accept(ctx, []media.Upload{{Name: "dot.png", Data: testPNG(t, 20, 20)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.SendMessage(ctx, m.ID, db.Send{WorkspaceID: wsID, Title: "t", Content: "look", Kind: "chat", Attachments: files}); err != nil {
		t.Fatal(err)
	}
	kb, err := store.CreateKB(ctx, m.ID, wsID, db.KBInput{Name: "Docs", EmbedModel: "embedder", Dims: 256})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.AddDocument(ctx, m.ID, kb.ID, db.NewDocument{Name: "a.txt", SHA256: "sum", Data: []byte("text")},
		func(pgx.Tx, db.Document) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := store.AddMemory(ctx, m.ID, db.MemoryInput{Fact: "likes tea", Source: db.MemoryManual}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateRole(ctx, m.ID, db.RoleInput{Name: "Poet", Prompt: "Rhyme."}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.AddWorkspaceHook(ctx, m.ID, db.WorkspaceHook{WorkspaceID: wsID, Event: "*", URL: "https://example.com/h", Secret: "s", TimeoutMS: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.AddLabel(ctx, m.ID, *run.AssistantMessageID, "kept"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.SetGoal(ctx, m.ID, run.ThreadID, "finish"); err != nil {
		t.Fatal(err)
	}
	if err := store.SetToolPolicy(ctx, m.ID, wsID, "write_file", true, "auto"); err != nil {
		t.Fatal(err)
	}
	folder := app.Agent.Root(db.Workspace{ID: wsID})
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(folder, "notes.md"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}

	cols := userColumns(t, store)
	before := rowsOf(t, store, cols, m.ID)
	if len(before) < 12 {
		t.Fatalf("the member's data is too thin to prove anything: %v", before)
	}
	adminBefore := rowsOf(t, store, cols, adminUser.ID)

	// Without the right email nothing happens.
	for _, typed := range []string{"", "admin@example.com", "doomed"} {
		if r := admin.Post(userPath(m.ID, "delete"), url.Values{"confirm": {typed}}); r.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("delete with %q typed = %d", typed, r.StatusCode)
		}
	}
	if got := rowsOf(t, store, cols, m.ID); len(got) != len(before) {
		t.Fatalf("a refused delete removed rows: %v, before %v", got, before)
	}

	if r := admin.Post(userPath(m.ID, "delete"), url.Values{"confirm": {" DOOMED@example.com "}}); r.StatusCode != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/admin/users?done=deleted") {
		t.Fatalf("delete = %d %q: %.300s", r.StatusCode, r.Header.Get("Location"), r.Body)
	}
	if left := rowsOf(t, store, cols, m.ID); len(left) > 0 {
		t.Fatalf("rows of the deleted user left: %v", left)
	}
	if after := rowsOf(t, store, cols, adminUser.ID); fmt.Sprint(after) != fmt.Sprint(adminBefore) {
		t.Fatalf("the other account's rows changed: %v, before %v", after, adminBefore)
	}
	var chunks, docs int
	if err := store.Pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM kb_chunks), (SELECT count(*) FROM kb_documents)").Scan(&chunks, &docs); err != nil || chunks+docs != 0 {
		t.Fatalf("knowledge left: %d chunks, %d documents (%v)", chunks, docs, err)
	}
	if _, err := os.Stat(folder); !os.IsNotExist(err) {
		t.Fatalf("the workspace folder is still there: %v", err)
	}
	if r := member.Get("/"); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("the deleted user's session still opens / (%d)", r.StatusCode)
	}
	if r := admin.Post(userPath(m.ID, "delete"), url.Values{"confirm": {"doomed@example.com"}}); r.StatusCode != http.StatusNotFound {
		t.Fatalf("delete again = %d", r.StatusCode)
	}
	if list := admin.Get("/admin/users").Body; strings.Contains(list, "doomed@example.com") {
		t.Fatal("the list still shows the deleted account")
	}
}

func regexpFind(t *testing.T, pattern, s string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no %s in %.300s", pattern, s)
	}
	return m[1]
}
