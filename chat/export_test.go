package chat_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"weft/chat"
	"weft/db"
)

// shape describes a tree without its ids: each message as its parent's
// index, role, content and status, plus the active leaf's index.
func shape(t *testing.T, store *db.DB, user, thread int64) (nodes []string, leaf int) {
	t.Helper()
	ctx := context.Background()
	msgs, err := store.TreeMessages(ctx, user, thread)
	if err != nil {
		t.Fatal(err)
	}
	th, err := store.Thread(ctx, user, thread)
	if err != nil {
		t.Fatal(err)
	}
	index := map[int64]int{}
	leaf = -1
	for i, m := range msgs {
		index[m.ID] = i
		parent := -1
		if m.ParentID != nil {
			parent = index[*m.ParentID]
		}
		nodes = append(nodes, strings.Join([]string{itoa(parent), m.Role, m.Content, m.Status}, "|"))
		if th.ActiveLeafID != nil && *th.ActiveLeafID == m.ID {
			leaf = i
		}
	}
	return nodes, leaf
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestExportThenImportGivesAnEqualTree(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	ctx := context.Background()
	q1 := e.send(0, "[[tokens:3]] first")
	e.wait(q1)
	q2 := e.send(q1.Thread.ID, "second <b>with markup</b>")
	e.wait(q2)
	alt, err := e.rt.Edit(ctx, e.user.ID, q2.User.ID, "second, edited")
	if err != nil {
		t.Fatal(err)
	}
	e.wait(alt)
	regen, err := e.rt.Retry(ctx, e.user.ID, q1.Assistant.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	e.wait(regen)
	if _, err := e.store.SelectBranch(ctx, e.user.ID, alt.User.ID); err != nil {
		t.Fatal(err)
	}

	th, _ := e.store.Thread(ctx, e.user.ID, q1.Thread.ID)
	msgs, _ := e.store.TreeMessages(ctx, e.user.ID, th.ID)
	var file bytes.Buffer
	if err := chat.ExportJSON(&file, th, msgs); err != nil {
		t.Fatal(err)
	}
	in, err := chat.ParseImport(bytes.NewReader(file.Bytes()))
	if err != nil {
		t.Fatalf("our own export does not import: %v", err)
	}
	copyT, err := e.store.ImportThread(ctx, e.user.ID, e.ws.ID, in)
	if err != nil {
		t.Fatal(err)
	}
	wantNodes, wantLeaf := shape(t, e.store, e.user.ID, th.ID)
	gotNodes, gotLeaf := shape(t, e.store, e.user.ID, copyT.ID)
	if strings.Join(gotNodes, "\n") != strings.Join(wantNodes, "\n") || gotLeaf != wantLeaf || len(gotNodes) != 7 {
		t.Fatalf("imported tree differs:\n%s\nleaf %d\nwant:\n%s\nleaf %d", strings.Join(gotNodes, "\n"), gotLeaf,
			strings.Join(wantNodes, "\n"), wantLeaf)
	}
	if copyT.Title != th.Title {
		t.Fatalf("title %q, want %q", copyT.Title, th.Title)
	}

	var md bytes.Buffer
	path, _, _ := e.store.ActivePath(ctx, e.user.ID, th.ID, 100)
	if err := chat.ExportMarkdown(&md, th, path); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## You\n\n[[tokens:3]] first", "## You\n\nsecond, edited", "## Assistant"} {
		if !strings.Contains(md.String(), want) {
			t.Fatalf("markdown export lacks %q:\n%s", want, md.String())
		}
	}
	if strings.Contains(md.String(), "with markup") {
		nodes, leaf := shape(t, e.store, e.user.ID, th.ID)
		t.Fatalf("the markdown export includes a branch that is not shown:\n%s\ntree:\n%s\nleaf %d", md.String(), strings.Join(nodes, "\n"), leaf)
	}
}

func TestImportRefusesBrokenFilesWithAReason(t *testing.T) {
	t.Parallel()
	head := `{"format":"weft-thread","version":1,"title":"x","messages":`
	for _, tc := range []struct{ name, file, want string }{
		{"not json", `{{{`, "not valid JSON"},
		{"other format", `{"format":"chatgpt","version":1}`, `expected format "weft-thread"`},
		{"no messages", head + `[]}`, "no messages"},
		{"parent after child", head + `[{"id":2,"parent":1,"role":"user","content":"a"},{"id":1,"role":"user","content":"b"}]}`, "does not come before it"},
		{"cycle to itself", head + `[{"id":1,"parent":1,"role":"user","content":"a"}]}`, "does not come before it"},
		{"duplicate id", head + `[{"id":1,"role":"user","content":"a"},{"id":1,"role":"user","content":"b"}]}`, "appears twice"},
		{"bad role", head + `[{"id":1,"role":"admin","content":"a"}]}`, "unknown role"},
		{"bad status", head + `[{"id":1,"role":"user","content":"a","status":"deleted"}]}`, "unknown status"},
		{"metadata not object", head + `[{"id":1,"role":"user","content":"a","metadata":[1]}]}`, "not an object"},
		{"leaf missing", head + `[{"id":1,"role":"user","content":"a"}],"active_leaf":9}`, "not in the file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := chat.ParseImport(strings.NewReader(tc.file))
			if !errors.Is(err, chat.ErrBadImport) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	in, err := chat.ParseImport(strings.NewReader(head + `[{"id":5,"role":"user","content":"a"},{"id":9,"parent":5,"role":"assistant","content":"b","status":"streaming"}]}`))
	if err != nil || in.Messages[1].Status != db.MsgInterrupted || in.Messages[1].Parent != 0 {
		t.Fatalf("a streaming answer imports as interrupted under its parent: %+v, %v", in, err)
	}
}
