package handlers_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"weft/db"
	"weft/importer"
	"weft/internal/testenv"
	"weft/internal/testwait"
	"weft/media"
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
	app := testenv.Start(t, store, testenv.Options{})
	ts, srv := app.TS, app.Handler

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
	newThread := func() db.Sent {
		sent, err := store.SendMessage(ctx, u.ID, db.Send{WorkspaceID: ws.ID, Title: "t", Content: "hi", Kind: "chat"})
		if err != nil {
			t.Fatal(err)
		}
		return sent
	}
	// A thread whose first answer has finished (the fake answers at once).
	if r := owner.Post("/workspaces/switch", url.Values{"workspace_id": {fmt.Sprint(ws.ID)}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("switch = %d", r.StatusCode)
	}
	if r := owner.Post("/t", url.Values{"workspace_id": {fmt.Sprint(ws.ID)}, "content": {"hi"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("first send = %d", r.StatusCode)
	}
	page, _, err := store.SidebarThreads(ctx, u.ID, ws.ID, nil, 1)
	if err != nil || len(page) != 1 {
		t.Fatalf("the first thread: %v %v", page, err)
	}
	first := waitIdle(t, store, u.ID, page[0].ID)
	W := fmt.Sprint(ws.ID)
	T := fmt.Sprint(first.ThreadID)
	R := fmt.Sprint(first.ID)
	M := fmt.Sprint(*first.AssistantMessageID)
	freshThread := func() string { return fmt.Sprintf("/t/%d/delete", newThread().Thread.ID) }
	freshMessage := func() string { return fmt.Sprintf("/m/%d/delete", newThread().User.ID) }
	freshClear := func() string {
		c, err := store.AddContextClear(ctx, u.ID, newThread().User.ID)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("/clears/%d/undo", c.ID)
	}
	U := fmt.Sprint(*first.UserMessageID)
	newRole := func(name string) db.Role {
		r, err := store.CreateRole(ctx, u.ID, db.RoleInput{Name: name, Prompt: "Be brief."})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	RL := fmt.Sprint(newRole("Editor").ID)
	kbN := 0
	newKB := func() db.KnowledgeBase {
		kbN++
		kb, err := store.CreateKB(ctx, u.ID, ws.ID, db.KBInput{Name: fmt.Sprint("KB ", kbN), EmbedModel: "embedder", Dims: 256})
		if err != nil {
			t.Fatal(err)
		}
		return kb
	}
	noJob := func(pgx.Tx, db.Document) error { return nil }
	newDoc := func(kb int64) db.Document {
		kbN++
		d, err := store.AddDocument(ctx, u.ID, kb, db.NewDocument{Name: "a.txt", SHA256: fmt.Sprint("sum", kbN), Data: []byte("text")}, noJob)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	theKB := newKB()
	K := fmt.Sprint(theKB.ID)
	D := fmt.Sprint(newDoc(theKB.ID).ID)
	freshKB := func() string { return fmt.Sprintf("/kb/%d/delete", newKB().ID) }
	freshDoc := func() string { return fmt.Sprintf("/kb/%s/documents/%d/delete", K, newDoc(theKB.ID).ID) }
	if err := store.SetSources(ctx, *first.AssistantMessageID, []db.Source{{N: 1, Document: "a.txt", Text: "text"}}); err != nil {
		t.Fatal(err)
	}
	approval, err := store.AddStep(ctx, first.ID, db.StepApproval, db.StepPending, db.StepData{Tool: "write_file"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	question, err := store.AddStep(ctx, first.ID, db.StepQuestion, db.StepPending,
		db.StepData{Questions: []db.Question{{Text: "Which?", Options: []string{"a", "b"}, Recommended: -1}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	AP, QS := fmt.Sprint(approval.ID), fmt.Sprint(question.ID)
	imp, err := app.Imports.Start(ctx, u.ID, ws.ID, importer.FormatChatGPT, "conversations.json",
		strings.NewReader(`[{"title":"t","mapping":{}}]`))
	if err != nil {
		t.Fatal(err)
	}
	IM := fmt.Sprint(imp.ID)
	files, err := app.Media.Accept(ctx, []media.Upload{{Name: "dot.png", Data: testPNG(t, 40, 30)}})
	if err != nil {
		t.Fatal(err)
	}
	withFile, err := store.SendMessage(ctx, u.ID, db.Send{WorkspaceID: ws.ID, Title: "t", Content: "look", Kind: "chat", Attachments: files})
	if err != nil {
		t.Fatal(err)
	}
	atts, err := store.Attachments(ctx, u.ID, []int64{withFile.User.ID})
	if err != nil || len(atts[withFile.User.ID]) != 1 {
		t.Fatalf("attachments %v %v", atts, err)
	}
	AT := fmt.Sprint(atts[withFile.User.ID][0].ID)
	md, err := store.AddMedia(ctx, u.ID, *first.AssistantMessageID, db.MediaImage, "a dot", "openai", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.FinishMedia(ctx, md.ID, &db.MediaReadyInfo{SHA256: files[0].SHA256, MIME: "image/png", ThumbSHA: files[0].ThumbSHA, Size: files[0].Size}, ""); err != nil {
		t.Fatal(err)
	}
	MD := fmt.Sprint(md.ID)
	freshHook := func() string {
		h, err := store.AddWorkspaceHook(ctx, u.ID, db.WorkspaceHook{WorkspaceID: ws.ID, Event: "*", URL: "https://example.com/hook", Secret: "s", TimeoutMS: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("/tools/hooks/%d/delete", h.ID)
	}
	roleN := 0
	freshRole := func() string { roleN++; return fmt.Sprintf("/roles/%d/delete", newRole(fmt.Sprint("Gone ", roleN)).ID) }
	newMemory := func(fact string) db.Memory {
		m, err := store.AddMemory(ctx, u.ID, db.MemoryInput{Fact: fact, Source: db.MemoryManual})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	MEM := fmt.Sprint(newMemory("likes tea").ID)
	if _, err := store.SetGoal(ctx, u.ID, first.ThreadID, "answer every question"); err != nil {
		t.Fatal(err)
	}
	memN := 0
	freshMemory := func() string {
		memN++
		return fmt.Sprintf("/memory/%d/delete", newMemory(fmt.Sprint("gone ", memN)).ID)
	}

	// Labels and branch summaries (issue 17).
	newLabel := func(name string) db.Label {
		l, err := store.AddLabel(ctx, u.ID, *first.AssistantMessageID, name)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	LB := fmt.Sprint(newLabel("kept").ID)
	freshLabel := func() string { return fmt.Sprintf("/labels/%d/delete", newLabel("gone").ID) }
	newSummary := func() db.BranchSummary { // a failed summary of a branch left
		s := newThread()
		if _, err := store.EditMessage(ctx, u.ID, s.User.ID, "edited", db.Fixed(db.RouteChat)); err != nil {
			t.Fatal(err)
		}
		if err := store.SetSummarizeBranches(ctx, u.ID, s.Thread.ID, true); err != nil {
			t.Fatal(err)
		}
		sw, err := store.LeaveBranch(ctx, u.ID, s.User.ID)
		if err != nil || sw.Summary == nil {
			t.Fatalf("leave a branch: %+v %v", sw, err)
		}
		if err := store.FinishBranchSummary(ctx, u.ID, sw.Summary.ID, sw.Summary.Attempt, "", "", "it failed"); err != nil {
			t.Fatal(err)
		}
		return *sw.Summary
	}
	BS := fmt.Sprint(newSummary().ID)
	freshSummary := func() string { return fmt.Sprintf("/branch-summaries/%d/delete", newSummary().ID) }

	// Accounts, sessions and invites (issue 18): throwaway accounts for
	// the administrator's destructive actions, so later rows keep theirs.
	userN := 0
	throwaway := func() db.User {
		userN++
		tu, _, err := store.CreateUser(ctx, fmt.Sprintf("throwaway%d@example.com", userN), "t", "x")
		if err != nil {
			t.Fatal(err)
		}
		return tu
	}
	freshUser := func(action string) func() string {
		return func() string { return fmt.Sprintf("/admin/users/%d/%s", throwaway().ID, action) }
	}
	deleteForm := url.Values{}
	freshDelete := func() string {
		tu := throwaway()
		deleteForm.Set("confirm", tu.Email) // the form is read after fresh runs
		return fmt.Sprintf("/admin/users/%d/delete", tu.ID)
	}
	otherUser, err := store.UserByEmail(ctx, "other@example.com")
	if err != nil {
		t.Fatal(err)
	}
	OU := fmt.Sprint(otherUser.ID)
	if _, err := store.CreateInvite(ctx, u.ID, "authzinvite", "", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	inviteN := 0
	freshInvite := func() string {
		inviteN++
		inv, err := store.CreateInvite(ctx, u.ID, fmt.Sprint("revoked", inviteN), "", time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("/admin/invites/%d/revoke", inv.ID)
	}
	resetFor := throwaway()
	if err := store.CreatePasswordReset(ctx, u.ID, resetFor.ID, "authzreset", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	resetN := 0
	freshReset := func() string {
		resetN++
		tok := fmt.Sprint("usedreset", resetN)
		if err := store.CreatePasswordReset(ctx, u.ID, throwaway().ID, tok, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		return "/reset/" + tok
	}
	freshSession := func() string { // another session of the owner
		phone := testenv.NewClient(t, ts.URL)
		phone.Login("owner@example.com", password)
		var id int64
		if err := store.Pool.QueryRow(ctx, "SELECT id FROM user_sessions WHERE token = $1", phone.SessionCookie()).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("/settings/sessions/%d/delete", id)
	}

	// A finished model pull (issue 18): its stream ends at once.
	pull, err := store.StartModelPull(ctx, u.ID, "llama3.2", "", "gone")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.FinishModelPull(ctx, pull.ID, db.PullFailed, db.PullProgress{}, "it failed"); err != nil {
		t.Fatal(err)
	}
	PL := fmt.Sprint(pull.ID)

	// Share links (issue 18): one of the first thread (its answer has the
	// media), one of the thread with the attachment, both with files.
	newShare := func(thread int64) (db.Share, string) {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		tok := base64.RawURLEncoding.EncodeToString(b)
		sum := sha256.Sum256([]byte(tok))
		sh, err := store.CreateShare(ctx, u.ID, thread, db.NewShare{TokenSHA256: sum[:], TokenHint: tok[:6], IncludeFiles: true})
		if err != nil {
			t.Fatal(err)
		}
		return sh, "/s/" + tok
	}
	_, SM := newShare(first.ThreadID)
	_, SA := newShare(withFile.Thread.ID)
	freshShare := func() string { sh, _ := newShare(first.ThreadID); return fmt.Sprintf("/shares/%d/revoke", sh.ID) }

	// API tokens (issue 19): the owner's, revoked fresh per caller.
	freshToken := func() string {
		addToken(t, store, u.ID, nil, db.ScopeChat)
		toks, err := store.APITokens(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("/settings/tokens/%d/revoke", toks[0].ID)
	}

	const (
		login = "→/login"
		self  = "any" // a route with no object id: the other user acts on their own data
	)
	type want struct{ owner, other, anon any }
	routes := []struct {
		method, pattern, path string
		form                  url.Values
		fresh                 func() string // a fresh path per caller (the owner's call destroys the object)
		want                  want
	}{
		{"GET", "/", "/", nil, nil, want{200, 200, login}},
		{"GET", "/healthz", "/healthz", nil, nil, want{200, 200, 200}},
		{"GET", "/readyz", "/readyz", nil, nil, want{200, 200, 200}},
		{"GET", "/metrics", "/metrics", nil, nil, want{200, 200, 200}},
		{"GET", "/static/*", "/static/app.css", nil, nil, want{200, 200, 200}},
		{"GET", "/login", "/login", nil, nil, want{303, 303, 200}},
		{"GET", "/register", "/register", nil, nil, want{303, 303, 200}},
		{"POST", "/t", "/t", url.Values{"workspace_id": {W}, "content": {"new"}}, nil, want{303, 404, login}},
		{"GET", "/t/{id}", "/t/" + T, nil, nil, want{200, 404, login}},
		{"POST", "/t/{id}/messages", "/t/" + T + "/messages", url.Values{"content": {"more"}}, nil, want{303, 404, login}},
		{"POST", "/t/{id}/rename", "/t/" + T + "/rename", url.Values{"title": {"new title"}}, nil, want{303, 404, login}},
		{"POST", "/t/{id}/pin", "/t/" + T + "/pin", url.Values{"pinned": {"true"}}, nil, want{303, 404, login}},
		{"POST", "/t/{id}/archive", "/t/" + T + "/archive", url.Values{"archived": {"false"}}, nil, want{303, 404, login}},
		{"GET", "/t/{id}/title", "/t/" + T + "/title", nil, nil, want{200, 404, login}},
		{"GET", "/runs/{id}/events", "/runs/" + R + "/events", nil, nil, want{200, 404, login}},
		{"GET", "/t/{id}/watch", "/t/" + T + "/watch?leaf=" + M + "&run=0", nil, nil, want{200, 404, login}},
		{"POST", "/runs/{id}/cancel", "/runs/" + R + "/cancel", nil, nil, want{303, 404, login}},
		{"POST", "/m/{id}/retry", "/m/" + M + "/retry", nil, nil, want{303, 404, login}},
		{"POST", "/t/{id}/delete", "", nil, freshThread, want{303, 404, login}},
		{"GET", "/t/{id}/history", "/t/" + T + "/history?before=" + M, nil, nil, want{200, 404, login}},
		{"GET", "/t/{id}/export.{format}", "/t/" + T + "/export.json", nil, nil, want{200, 404, login}},
		{"POST", "/t/{id}/move", "/t/" + T + "/move", url.Values{"workspace_id": {W}}, nil, want{303, 404, login}},
		{"POST", "/m/{id}/edit", "/m/" + U + "/edit", url.Values{"content": {"edited"}}, nil, want{303, 404, login}},
		{"POST", "/m/{id}/continue", "/m/" + M + "/continue", nil, nil, want{400, 404, login}},
		{"POST", "/m/{id}/select", "/m/" + M + "/select", nil, nil, want{303, 404, login}},
		{"POST", "/m/{id}/fork", "/m/" + M + "/fork", nil, nil, want{303, 404, login}},
		{"POST", "/m/{id}/delete", "", nil, freshMessage, want{303, 404, login}},
		{"GET", "/m/{id}/markdown", "/m/" + M + "/markdown", nil, nil, want{200, 404, login}},
		{"POST", "/clears/{id}/undo", "", nil, freshClear, want{303, 404, login}},
		{"GET", "/search", "/search?q=hi", nil, nil, want{200, 200, login}},
		{"GET", "/archived", "/archived", nil, nil, want{200, 200, login}},
		{"GET", "/import", "/import", nil, nil, want{200, 200, login}},
		{"POST", "/import", "/import", url.Values{"x": {"y"}}, nil, want{422, 422, login}},
		{"GET", "/imports/{id}", "/imports/" + IM, nil, nil, want{200, 404, login}},
		{"GET", "/imports/{id}/progress", "/imports/" + IM + "/progress", nil, nil, want{200, 404, login}},
		{"POST", "/imports/{id}/stop", "/imports/" + IM + "/stop", nil, nil, want{303, 404, login}},
		{"GET", "/w/{id}/threads", "/w/" + W + "/threads", nil, nil, want{200, 404, login}},
		{"GET", "/workspaces", "/workspaces", nil, nil, want{200, 200, login}},
		{"POST", "/workspaces", "/workspaces", url.Values{"name": {"Third"}}, nil, want{303, 303, login}},
		{"POST", "/workspaces/switch", "/workspaces/switch", url.Values{"workspace_id": {W}}, nil, want{303, 404, login}},
		{"POST", "/workspaces/{id}/rename", "/workspaces/" + W + "/rename", url.Values{"name": {"Renamed"}}, nil, want{303, 404, login}},
		{"POST", "/workspaces/{id}/archive", "/workspaces/" + W + "/archive", url.Values{"archived": {"false"}}, nil, want{303, 404, login}},
		{"GET", "/admin", "/admin", nil, nil, want{200, 403, login}},
		{"POST", "/admin/signup", "/admin/signup", url.Values{"mode": {"open"}}, nil, want{303, 403, login}},
		{"POST", "/admin/system-prompt", "/admin/system-prompt", url.Values{"system_prompt": {"Be kind."}}, nil, want{303, 403, login}},
		{"POST", "/admin/web-search", "/admin/web-search", url.Values{"kind": {"searxng"}, "url": {""}, "results": {"5"}, "pages": {"3"}}, nil, want{303, 403, login}},
		{"POST", "/reload-mcp", "/reload-mcp", nil, nil, want{400, 403, login}}, // no MCP servers configured here
		{"GET", "/t/{id}/context", "/t/" + T + "/context", nil, nil, want{200, 404, login}},
		{"POST", "/t/{id}/settings", "/t/" + T + "/settings", url.Values{"role": {RL}, "notes": {"n"}, "compaction": {"on"}}, nil, want{303, 404, login}},
		{"GET", "/roles", "/roles", nil, nil, want{200, 200, login}},
		{"POST", "/roles", "/roles", url.Values{"name": {"Poet"}, "prompt": {"Rhyme."}}, nil, want{303, 303, login}},
		{"GET", "/roles/{id}", "/roles/" + RL, nil, nil, want{200, 404, login}},
		{"POST", "/roles/{id}", "/roles/" + RL, url.Values{"name": {"Editor"}, "prompt": {"Edit."}}, nil, want{303, 404, login}},
		{"POST", "/roles/{id}/delete", "", nil, freshRole, want{303, 404, login}},
		{"GET", "/memory", "/memory", nil, nil, want{200, 200, login}},
		{"POST", "/memory", "/memory", url.Values{"fact": {"works nights"}}, nil, want{303, 303, login}},
		{"POST", "/memory/extract", "/memory/extract", url.Values{"extract": {"false"}}, nil, want{303, 303, login}},
		{"POST", "/memory/{id}", "/memory/" + MEM, url.Values{"fact": {"likes green tea"}}, nil, want{303, 404, login}},
		{"POST", "/memory/{id}/delete", "", nil, freshMemory, want{303, 404, login}},
		{"POST", "/m/{id}/labels", "/m/" + M + "/labels", url.Values{"name": {"key answer"}}, nil, want{303, 404, login}},
		{"POST", "/labels/{id}/rename", "/labels/" + LB + "/rename", url.Values{"name": {"renamed"}}, nil, want{303, 404, login}},
		{"POST", "/labels/{id}/jump", "/labels/" + LB + "/jump", nil, nil, want{303, 404, login}},
		{"POST", "/labels/{id}/delete", "", nil, freshLabel, want{303, 404, login}},
		{"POST", "/t/{id}/branch-summaries", "/t/" + T + "/branch-summaries", url.Values{"summarize": {"false"}}, nil, want{303, 404, login}},
		{"GET", "/branch-summaries/{id}", "/branch-summaries/" + BS, nil, nil, want{200, 404, login}},
		{"POST", "/branch-summaries/{id}/retry", "/branch-summaries/" + BS + "/retry", nil, nil, want{303, 404, login}},
		{"POST", "/branch-summaries/{id}/delete", "", nil, freshSummary, want{303, 404, login}},
		{"GET", "/t/{id}/temporary", "/t/" + T + "/temporary", nil, nil, want{200, 404, login}},
		{"POST", "/t/{id}/temporary", "/t/" + T + "/temporary", url.Values{"temporary": {"false"}}, nil, want{303, 404, login}},
		{"GET", "/t/{id}/goal", "/t/" + T + "/goal", nil, nil, want{200, 404, login}},
		{"POST", "/t/{id}/goal", "/t/" + T + "/goal", url.Values{"action": {"budget"}, "runs": {"2"}, "tokens": {"2000"}, "minutes": {"5"}}, nil, want{303, 404, login}},
		{"GET", "/settings", "/settings", nil, nil, want{200, 200, login}},
		{"POST", "/settings/instructions", "/settings/instructions", url.Values{"instructions": {"I am a chemist."}}, nil, want{303, 303, login}},
		{"GET", "/kb", "/kb", nil, nil, want{200, 200, login}},
		{"POST", "/kb", "/kb", url.Values{"name": {"Docs"}, "embed_model": {"embedder"}}, nil, want{303, 303, login}},
		{"GET", "/kb/{id}", "/kb/" + K + "?q=text", nil, nil, want{200, 404, login}},
		{"GET", "/kb/{id}/documents", "/kb/" + K + "/documents", nil, nil, want{200, 404, login}},
		{"POST", "/kb/{id}/upload", "/kb/" + K + "/upload", url.Values{"x": {"y"}}, nil, want{400, 404, login}},
		{"POST", "/kb/{id}/rename", "/kb/" + K + "/rename", url.Values{"name": {"Renamed KB"}}, nil, want{303, 404, login}},
		{"POST", "/kb/{id}/settings", "/kb/" + K + "/settings", url.Values{"top_k": {"5"}}, nil, want{303, 404, login}},
		{"POST", "/kb/{id}/model", "/kb/" + K + "/model", url.Values{"embed_model": {"embedder-small"}}, nil, want{303, 404, login}},
		{"POST", "/kb/{id}/documents/{doc}/retry", "/kb/" + K + "/documents/" + D + "/retry", nil, nil, want{303, 404, login}},
		{"POST", "/kb/{id}/web", "/kb/" + K + "/web", url.Values{"url": {"http://127.0.0.1:1/page"}}, nil, want{303, 404, login}},
		{"GET", "/kb/{id}/web", "/kb/" + K + "/web", nil, nil, want{200, 404, login}},
		{"POST", "/kb/{id}/refetch", "/kb/" + K + "/refetch", nil, nil, want{303, 404, login}},
		{"POST", "/kb/{id}/documents/{doc}/refetch", "/kb/" + K + "/documents/" + D + "/refetch", nil, nil, want{400, 404, login}},
		{"POST", "/kb/{id}/documents/{doc}/delete", "", nil, freshDoc, want{303, 404, login}},
		{"POST", "/kb/{id}/delete", "", nil, freshKB, want{303, 404, login}},
		{"GET", "/m/{id}/sources/{n}", "/m/" + M + "/sources/1", nil, nil, want{200, 404, login}},
		{"POST", "/t/{id}/kbs", "/t/" + T + "/kbs", url.Values{"kb": {K}}, nil, want{303, 404, login}},
		{"GET", "/tools", "/tools", nil, nil, want{200, 200, login}},
		{"POST", "/tools", "/tools", url.Values{"workspace_id": {W}, "max_steps": {"10"}, "mode_list_files": {"auto"}, "mode_read_file": {"auto"},
			"mode_search_files": {"auto"}, "mode_write_file": {"ask"}, "mode_edit_file": {"ask"}, "mode_delete_file": {"ask"},
			"mode_search_knowledge_base": {"auto"}, "mode_ask_user": {"auto"}, "mode_fetch_url": {"ask"}}, nil, want{303, 404, login}},
		{"POST", "/steps/{id}/decide", "/steps/" + AP + "/decide", url.Values{"decision": {"once"}}, nil, want{303, 404, login}},
		{"POST", "/steps/{id}/answer", "/steps/" + QS + "/answer", url.Values{"a0": {"b"}}, nil, want{303, 404, login}},
		{"POST", "/runs/{id}/resume", "/runs/" + R + "/resume", nil, nil, want{400, 404, login}},
		{"GET", "/t/{id}/debug", "/t/" + T + "/debug", nil, nil, want{200, 404, login}},
		{"GET", "/tools/hooks", "/tools/hooks", nil, nil, want{200, 200, login}},
		{"POST", "/tools/hooks", "/tools/hooks", url.Values{"workspace_id": {W}, "event": {"*"}, "url": {"https://example.com/h"}}, nil, want{200, 404, login}},
		{"POST", "/tools/hooks/{id}/delete", "", nil, freshHook, want{303, 404, login}},
		{"GET", "/attachments/{id}", "/attachments/" + AT, nil, nil, want{200, 404, login}},
		{"GET", "/attachments/{id}/thumb", "/attachments/" + AT + "/thumb", nil, nil, want{200, 404, login}},
		{"GET", "/media/{id}", "/media/" + MD, nil, nil, want{200, 404, login}},
		{"GET", "/media/{id}/thumb", "/media/" + MD + "/thumb", nil, nil, want{200, 404, login}},
		{"GET", "/media/{id}/card", "/media/" + MD + "/card", nil, nil, want{200, 404, login}},
		{"POST", "/m/{id}/speak", "/m/" + M + "/speak", nil, nil, want{303, 404, login}},
		{"POST", "/t/{id}/media", "/t/" + T + "/media", url.Values{"tts": {"on"}}, nil, want{303, 404, login}},
		{"GET", "/models", "/models", nil, nil, want{200, 200, login}},
		{"GET", "/admin/models", "/admin/models", nil, nil, want{200, 403, login}},
		{"POST", "/admin/models/pull", "/admin/models/pull", url.Values{"name": {"tiny"}}, nil, want{303, 403, login}},
		{"POST", "/admin/models/pulls/{id}/cancel", "/admin/models/pulls/" + PL + "/cancel", nil, nil, want{303, 403, login}},
		{"GET", "/admin/models/pulls/{id}/events", "/admin/models/pulls/" + PL + "/events", nil, nil, want{200, 403, login}},
		{"GET", "/admin/models/delete", "/admin/models/delete?name=vision", nil, nil, want{200, 403, login}},
		{"POST", "/admin/models/delete", "/admin/models/delete", url.Values{"name": {"vision:latest"}, "confirm": {"yes"}}, nil, want{303, 403, login}},
		{"POST", "/admin/models/unload", "/admin/models/unload", url.Values{"name": {"tiny:latest"}}, nil, want{303, 403, login}},
		{"POST", "/workspaces/{id}/model", "/workspaces/" + W + "/model", url.Values{"model": {"tiny:latest"}}, nil, want{303, 404, login}},
		{"POST", "/admin/media", "/admin/media", url.Values{"tts_engine": {"espeak"}}, nil, want{303, 403, login}},
		{"GET", "/admin/users", "/admin/users?q=example&role=member&state=active", nil, nil, want{200, 403, login}},
		{"GET", "/admin/users/{id}", "/admin/users/" + OU, nil, nil, want{200, 403, login}},
		{"POST", "/admin/users/{id}/disable", "", nil, freshUser("disable"), want{303, 403, login}},
		{"POST", "/admin/users/{id}/enable", "", nil, freshUser("enable"), want{303, 403, login}},
		{"POST", "/admin/users/{id}/role", "", url.Values{"role": {"admin"}}, freshUser("role"), want{303, 403, login}},
		{"POST", "/admin/users/{id}/reset-link", "/admin/users/" + OU + "/reset-link", nil, nil, want{200, 403, login}},
		{"POST", "/admin/users/{id}/delete", "", deleteForm, freshDelete, want{303, 403, login}},
		{"POST", "/admin/invites", "/admin/invites", url.Values{"days": {"1"}}, nil, want{200, 403, login}},
		{"POST", "/admin/invites/{id}/revoke", "", nil, freshInvite, want{303, 403, login}},
		{"GET", "/invite/{token}", "/invite/authzinvite", nil, nil, want{303, 303, 200}},
		{"GET", "/reset/{token}", "/reset/authzreset", nil, nil, want{200, 200, 200}},
		{"POST", "/reset/{token}", "", url.Values{"password": {"a new long password"}}, freshReset, want{"→/login?reset", "→/login?reset", "→/login?reset"}},
		{"POST", "/settings/password", "/settings/password", url.Values{"current_password": {"wrong"}, "new_password": {"a new long password"}}, nil, want{422, 422, login}},
		{"POST", "/settings/sessions/others", "/settings/sessions/others", nil, nil, want{303, 303, login}},
		{"POST", "/settings/sessions/{id}/delete", "", nil, freshSession, want{303, 404, login}},
		{"POST", "/t/{id}/shares", "/t/" + T + "/shares", url.Values{"expires": {"7d"}}, nil, want{200, 404, login}},
		{"POST", "/shares/{id}/revoke", "", nil, freshShare, want{303, 404, login}},
		{"GET", "/shares", "/shares", nil, nil, want{200, 200, login}},
		{"POST", "/settings/tokens", "/settings/tokens", url.Values{"name": {"cli"}, "scope": {"chat"}, "expires": {"7d"}}, nil, want{200, 200, login}},
		{"POST", "/settings/tokens/{id}/revoke", "", nil, freshToken, want{303, 404, login}},
		{"GET", "/s/{token}", SM, nil, nil, want{200, 200, 200}},
		{"GET", "/s/{token}/attachments/{id}", SA + "/attachments/" + AT, nil, nil, want{200, 200, 200}},
		{"GET", "/s/{token}/attachments/{id}/thumb", SA + "/attachments/" + AT + "/thumb", nil, nil, want{200, 200, 200}},
		{"GET", "/s/{token}/media/{id}", SM + "/media/" + MD, nil, nil, want{200, 200, 200}},
		{"GET", "/s/{token}/media/{id}/thumb", SM + "/media/" + MD + "/thumb", nil, nil, want{200, 200, 200}},
		{"POST", "/login", "/login", url.Values{"email": {"nobody@example.com"}, "password": {"wrong password"}}, nil, want{401, 401, 401}},
		{"POST", "/register", "/register", url.Values{"email": {"bad"}, "password": {"x"}}, nil, want{422, 422, 422}},
		{"POST", "/logout", "/logout", nil, nil, want{login, login, login}},
		// Single sign-on is not configured here: its routes are 404 for
		// everyone (TestSingleSignOnRoutesAnswerSignedInAndAnonymousCallers
		// covers them configured).
		{"GET", "/auth/oidc/login", "/auth/oidc/login", nil, nil, want{404, 404, 404}},
		{"POST", "/auth/oidc/login", "/auth/oidc/login", url.Values{}, nil, want{404, 404, 404}},
		{"GET", "/auth/oidc/callback", "/auth/oidc/callback?state=s&code=c", nil, nil, want{404, 404, 404}},
		{"GET", "/auth/oidc/link", "/auth/oidc/link", nil, nil, want{404, 404, 404}},
		{"POST", "/auth/oidc/link", "/auth/oidc/link", url.Values{"password": {password}}, nil, want{404, 404, 404}},
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
			if rt.fresh != nil {
				path = rt.fresh()
			}
			if rt.pattern == "/logout" && caller.name != "anonymous" {
				continue // checked on its own below, it would sign the caller out
			}
			var r testenv.Response
			if rt.pattern == "/t/{id}/watch" {
				r = openOnly(t, caller.client, path) // a thread's live watch never ends by itself
			} else {
				r = caller.client.Do(rt.method, path, rt.form)
			}
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
	// Rooms (issue 20): a fourth caller, a member of the owner's room. A
	// room is reached by its members only (anyone else: 404); its changes
	// are the owner's (a member: 403), but leaving.
	member := testenv.NewClient(t, ts.URL)
	member.Register("member@example.com", password)
	memberUser, err := store.UserByEmail(ctx, "member@example.com")
	if err != nil {
		t.Fatal(err)
	}
	newRoom := func(name string) db.Room {
		room, err := store.CreateRoom(ctx, u.ID, ws.ID, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.InviteRoomMember(ctx, u.ID, room.ID, "member@example.com"); err != nil {
			t.Fatal(err)
		}
		return room
	}
	theRoom := newRoom("Authz room")
	ROOM := fmt.Sprint(theRoom.ID)
	agentN := 0
	newAgent := func() db.RoomAgent {
		agentN++
		a, err := store.AddRoomAgent(ctx, u.ID, theRoom.ID, db.RoomAgentInput{Name: fmt.Sprint("Agent", agentN), Model: "tiny:latest"})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	AG := fmt.Sprint(newAgent().ID)
	// An answer in the room asked by the owner (finished: the fake answers
	// at once), with a pending approval and question: the member is
	// neither its asker nor the owner.
	if _, err := app.RT.RoomSend(ctx, u.ID, theRoom, "@Agent1 hi"); err != nil {
		t.Fatal(err)
	}
	roomRun := waitIdle(t, store, u.ID, theRoom.ThreadID)
	roomApproval, err := store.AddStep(ctx, roomRun.ID, db.StepApproval, db.StepPending, db.StepData{Tool: "write_file"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	roomQuestion, err := store.AddStep(ctx, roomRun.ID, db.StepQuestion, db.StepPending,
		db.StepData{Questions: []db.Question{{Text: "Which?", Options: []string{"a", "b"}, Recommended: -1}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	RUN := "/rooms/" + ROOM + "/runs/" + fmt.Sprint(roomRun.ID)
	RAP, RQS := fmt.Sprint(roomApproval.ID), fmt.Sprint(roomQuestion.ID)
	inviteForm := url.Values{}
	freshInvitee := func() string {
		inviteForm.Set("email", throwaway().Email) // the form is read after fresh runs
		return "/rooms/" + ROOM + "/members"
	}
	freshRoomMember := func() string {
		tu := throwaway()
		if _, err := store.InviteRoomMember(ctx, u.ID, theRoom.ID, tu.Email); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("/rooms/%s/members/%d/remove", ROOM, tu.ID)
	}
	freshLeave := func() string { return fmt.Sprintf("/rooms/%d/leave", newRoom("Left").ID) }
	freshAgent := func() string { return fmt.Sprintf("/rooms/%s/agents/%d/delete", ROOM, newAgent().ID) }
	freshRoom := func() string { return fmt.Sprintf("/rooms/%d/delete", newRoom("Doomed").ID) }
	type roomWant struct{ owner, member, other, anon any }
	roomRoutes := []struct {
		method, pattern, path string
		form                  url.Values
		fresh                 func() string
		want                  roomWant
	}{
		{"GET", "/rooms", "/rooms", nil, nil, roomWant{200, 200, 200, login}},
		{"POST", "/rooms", "/rooms", url.Values{"name": {"Mine"}}, nil, roomWant{303, 303, 303, login}},
		{"GET", "/rooms/{id}", "/rooms/" + ROOM, nil, nil, roomWant{200, 200, 404, login}},
		{"POST", "/rooms/{id}/messages", "/rooms/" + ROOM + "/messages", url.Values{"content": {"hello, room"}}, nil, roomWant{303, 303, 404, login}},
		{"POST", "/rooms/{id}/members", "", inviteForm, freshInvitee, roomWant{303, 403, 404, login}},
		{"POST", "/rooms/{id}/members/{user}/remove", "", nil, freshRoomMember, roomWant{303, 403, 404, login}},
		{"POST", "/rooms/{id}/leave", "", nil, freshLeave, roomWant{409, "→/rooms", 404, login}},
		{"POST", "/rooms/{id}/agents", "/rooms/" + ROOM + "/agents", url.Values{"name": {"Added"}, "model": {"tiny:latest"}}, nil, roomWant{303, 403, 404, login}},
		{"GET", "/rooms/{id}/agents/{agent}", "/rooms/" + ROOM + "/agents/" + AG, nil, nil, roomWant{200, 403, 404, login}},
		{"POST", "/rooms/{id}/agents/{agent}", "/rooms/" + ROOM + "/agents/" + AG, url.Values{"name": {"Renamed"}, "model": {"tiny:latest"}}, nil, roomWant{303, 403, 404, login}},
		{"POST", "/rooms/{id}/agents/{agent}/delete", "", nil, freshAgent, roomWant{303, 403, 404, login}},
		{"POST", "/rooms/{id}/settings", "/rooms/" + ROOM + "/settings", url.Values{"name": {"Authz room"}, "mention_depth": {"2"},
			"summarize_at": {"80"}, "history_messages": {"0"}, "keep_recent": {"6"}}, nil, roomWant{303, 403, 404, login}},
		{"POST", "/rooms/{id}/delete", "", url.Values{"confirm": {"Doomed"}}, freshRoom, roomWant{303, 403, 404, login}},
		{"GET", "/rooms/{id}/events", "/rooms/" + ROOM + "/events", nil, nil, roomWant{200, 200, 404, login}},
		{"POST", "/rooms/{id}/runs/{run}/stop", RUN + "/stop", nil, nil, roomWant{303, 403, 404, login}},
		{"POST", "/rooms/{id}/runs/{run}/steps/{step}/decide", RUN + "/steps/" + RAP + "/decide", url.Values{"decision": {"once"}}, nil, roomWant{303, 403, 404, login}},
		{"POST", "/rooms/{id}/runs/{run}/steps/{step}/answer", RUN + "/steps/" + RQS + "/answer", url.Values{"a0": {"b"}}, nil, roomWant{303, 403, 404, login}},
		// A thread route the room's messages use: their copy button.
		{"GET", "/m/{id}/markdown", fmt.Sprintf("/m/%d/markdown", *roomRun.AssistantMessageID), nil, nil, roomWant{200, 200, 404, login}},
	}
	for _, rt := range roomRoutes {
		covered[rt.method+" "+rt.pattern] = true
		for _, caller := range []struct {
			name   string
			client *testenv.Client
			want   any
		}{{"anonymous", anon, rt.want.anon}, {"other user", other, rt.want.other}, {"member", member, rt.want.member}, {"owner", owner, rt.want.owner}} {
			path := rt.path
			if rt.fresh != nil {
				path = rt.fresh()
			}
			var r testenv.Response
			if rt.pattern == "/rooms/{id}/events" {
				r = openOnly(t, caller.client, path) // a room's stream never ends by itself
			} else {
				r = caller.client.Do(rt.method, path, rt.form)
			}
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
			if r.StatusCode == http.StatusNotFound && strings.Contains(r.Body, "Authz room") {
				t.Errorf("%s %s as %s: the 404 page shows the room", rt.method, path, caller.name)
			}
		}
	}
	if _, err := store.RoomForMember(ctx, memberUser.ID, theRoom.ID); err != nil {
		t.Errorf("the member lost the room along the table: %v", err)
	}

	// The API (issue 19): called with the owner's token, the other user's
	// token, and none. The owner's objects (workspace, knowledge base) named
	// with the other user's token are a 404; no token is a 401.
	// The owner's answers started by the rows above must end first: an API
	// answer takes a slot of the per-user run cap like they do.
	testwait.For(t, "the owner's runs to end", 30*time.Second, func() bool {
		n, err := store.ActiveRunCount(ctx, u.ID)
		return err == nil && n == 0
	})
	ownerToken := addToken(t, store, u.ID, nil, db.ScopeChat, db.ScopeKB)
	otherToken := addToken(t, store, otherUser.ID, nil, db.ScopeChat, db.ScopeKB)
	chatBody := func(weft string) string {
		return `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"weft":` + weft + `}`
	}
	for _, rt := range []struct {
		method, pattern, path, body string
		want                        want
	}{
		{"GET", "/v1/models", "/v1/models", "", want{200, 200, 401}},
		{"POST", "/v1/chat/completions", "/v1/chat/completions", chatBody(`{"workspace_id":` + W + `,"store":true}`), want{200, 404, 401}},
		{"POST", "/v1/chat/completions", "/v1/chat/completions", chatBody(`{"knowledge_bases":[` + K + `]}`), want{200, 404, 401}},
		{"POST", "/v1/embeddings", "/v1/embeddings", `{"model":"embedder","input":"hi"}`, want{200, 200, 401}},
	} {
		covered[rt.method+" "+rt.pattern] = true
		for _, caller := range []struct {
			name, token string
			want        any
		}{{"anonymous", "", rt.want.anon}, {"other user", otherToken, rt.want.other}, {"owner", ownerToken, rt.want.owner}} {
			r := rawAPI(t, app, rt.method, rt.path, caller.token, rt.body)
			if r.StatusCode != caller.want {
				t.Errorf("%s %s %s with the %s's token = %d %s, want %d", rt.method, rt.path, rt.body, caller.name, r.StatusCode, r.Body, caller.want)
			}
			if strings.Contains(r.Body, "owner@example.com") || (caller.name != "owner" && strings.Contains(r.Body, "KB ")) {
				t.Errorf("%s %s as %s shows the owner's data: %s", rt.method, rt.path, caller.name, r.Body)
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

// waitIdle waits until the thread has no active run and returns its latest run.
func waitIdle(t *testing.T, store *db.DB, user, thread int64) db.Run {
	t.Helper()
	ctx := context.Background()
	var active []db.Run
	if !testwait.Until(20*time.Second, func() bool {
		var err error
		if active, err = store.ActiveRuns(ctx, user, thread); err != nil {
			t.Fatal(err)
		}
		return len(active) == 0
	}) {
		t.Fatalf("thread %d still has active runs: %+v", thread, active)
	}
	var id int64
	if err := store.Pool.QueryRow(ctx, "SELECT max(id) FROM runs WHERE thread_id = $1 AND parent_run_id IS NULL", thread).Scan(&id); err != nil {
		t.Fatal(err)
	}
	r, err := store.Run(ctx, user, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// openOnly GETs path and answers its status and headers, closing the
// response once they arrived (a room's event stream lasts as long as the
// room); an error page's body is read.
func openOnly(t *testing.T, c *testenv.Client, path string) testenv.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	var body []byte
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		body, _ = io.ReadAll(resp.Body)
	}
	return testenv.Response{Response: resp, Body: string(body)}
}
