package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"weft/db"
	"weft/internal/testenv"
	"weft/media"
)

// A stored image whose file is gone must not fail the thread (every later
// turn sends it again) nor tell the user where files live on the server.
func TestAttachmentsWhoseFileIsGoneDoNotBreakTheThread(t *testing.T) {
	t.Parallel()
	e := newMediaEnv(t, testenv.Options{})
	thread, r := e.start("vision", "look", map[string][]byte{"dot.png": testPNG(t, 40, 30)})
	if thread == 0 {
		t.Fatalf("send: %d %.300s", r.StatusCode, r.Body)
	}
	a := e.attachments(e.userMessage(thread).ID)[0]
	if err := e.app.Media.Blobs.Remove(a.SHA256); err != nil {
		t.Fatal(err)
	}
	if got := e.c.Get(fmt.Sprintf("/attachments/%d", a.ID)); got.StatusCode != http.StatusNotFound {
		t.Errorf("a missing file is served with %d, want 404", got.StatusCode)
	}
	e.c.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"And now?"}})
	run := waitIdle(t, e.app.Store, e.user.ID, thread)
	m, err := e.app.Store.Message(context.Background(), e.user.ID, *run.AssistantMessageID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != db.MsgComplete || m.Error != "" {
		t.Fatalf("the next answer: %s %q", m.Status, m.Error)
	}
	req := trRequestFor(t, e.app.Fake, "And now?")
	if !strings.Contains(req.Messages[len(req.Messages)-3].Content, "no longer stored") {
		t.Errorf("the model is not told the image is gone: %q", req.Messages[len(req.Messages)-3].Content)
	}
}

// A file over the limit is named with its real size, not the size of the
// part of it that was read.
func TestAttachmentsOverTheLimitNameTheirRealSize(t *testing.T) {
	t.Parallel()
	e := newMediaEnv(t, testenv.Options{Media: media.Config{Limits: media.Limits{MaxFileBytes: 64 << 10}}})
	_, r := e.start("vision", "x", map[string][]byte{"big.txt": []byte(strings.Repeat("a", 200<<10))})
	if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "big.txt is 200 KB") {
		t.Errorf("oversize: %d %.400s", r.StatusCode, r.Body)
	}
}

// Another user's generated image cannot be attached (and nothing is sent).
func TestAttachmentsOfAnotherUsersMediaAreRefused(t *testing.T) {
	t.Parallel()
	e := newMediaEnv(t, testenv.Options{})
	ctx := context.Background()
	thread, _ := e.start("vision", "hello", nil)
	run := waitIdle(t, e.app.Store, e.user.ID, thread)
	files, err := e.app.Media.Accept(ctx, []media.Upload{{Name: "dot.png", Data: testPNG(t, 40, 30)}})
	if err != nil {
		t.Fatal(err)
	}
	md, err := e.app.Store.AddMedia(ctx, e.user.ID, *run.AssistantMessageID, db.MediaImage, "a dot", "openai", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.app.Store.FinishMedia(ctx, md.ID, &db.MediaReadyInfo{SHA256: files[0].SHA256, MIME: "image/png", ThumbSHA: files[0].ThumbSHA, Size: files[0].Size}, ""); err != nil {
		t.Fatal(err)
	}
	other := testenv.NewClient(t, e.app.TS.URL)
	other.Register("other-attacher@example.com", password)
	ou, err := e.app.Store.UserByEmail(ctx, "other-attacher@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ows, err := e.app.Store.DefaultWorkspace(ctx, ou.ID)
	if err != nil {
		t.Fatal(err)
	}
	r := sendFiles(t, other, "/t", url.Values{"workspace_id": {fmt.Sprint(ows.ID)}, "model": {"vision"}, "content": {"steal"},
		"media": {fmt.Sprint(md.ID)}}, nil)
	if r.StatusCode == http.StatusSeeOther {
		t.Fatalf("another user attached the media: %s", r.Header.Get("Location"))
	}
	var n int
	if err := e.app.Store.Pool.QueryRow(ctx, "SELECT count(*) FROM attachments WHERE owner_id = $1", ou.ID).Scan(&n); err != nil || n != 0 {
		t.Errorf("attachments of the other user: %d %v", n, err)
	}
}

// Deleting a thread must not remove a file that a send in progress has just
// stored again (same content) and is about to reference; an old file no
// longer referenced goes at once.
func TestUnusedFilesReleaseSparesAFileBeingSentAgain(t *testing.T) {
	t.Parallel()
	e := newMediaEnv(t, testenv.Options{})
	ctx := context.Background()
	doc := []byte("# Shared\n\nThe same notes, sent twice.")
	thread, _ := e.start("tiny", "first", map[string][]byte{"notes.md": doc})
	a := e.attachments(e.userMessage(thread).ID)[0]
	blob := filepath.Join(e.app.Media.Blobs.(*media.Blobs).Dir, a.SHA256[:2], a.SHA256)
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(blob, old, old); err != nil {
		t.Fatal(err)
	}
	// A second send of the same file has stored it; its transaction has
	// not committed yet when the first thread is deleted.
	files, err := e.app.Media.Accept(ctx, []media.Upload{{Name: "notes.md", Data: doc}})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.c.Post(fmt.Sprintf("/t/%d/delete", thread), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete: %d", r.StatusCode)
	}
	if _, err := e.app.Media.Blobs.Read(a.SHA256); err != nil {
		t.Fatalf("the file being sent again was removed: %v", err)
	}
	sent, err := e.app.Store.SendMessage(ctx, e.user.ID, db.Send{WorkspaceID: e.ws.ID, Title: "t", Content: "second", Kind: "chat", Attachments: files})
	if err != nil {
		t.Fatal(err)
	}

	// Once it is old, deleting its last reference removes it at once.
	if err := os.Chtimes(blob, old, old); err != nil {
		t.Fatal(err)
	}
	if r := e.c.Post(fmt.Sprintf("/t/%d/delete", sent.Thread.ID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete: %d", r.StatusCode)
	}
	if _, err := e.app.Media.Blobs.Read(a.SHA256); err == nil {
		t.Errorf("a released old file is still stored")
	}
}

// Media whose job was lost (a crash, a worker that died) does not stay
// pending, polling, forever: its card shows it failed, and the collection
// records that.
func TestReadAloudWhoseJobWasLostEndsFailed(t *testing.T) {
	t.Parallel()
	e := newMediaEnv(t, testenv.Options{})
	ctx := context.Background()
	thread, _ := e.start("tiny", "hello", nil)
	run := waitIdle(t, e.app.Store, e.user.ID, thread)
	md, err := e.app.Store.AddMedia(ctx, e.user.ID, *run.AssistantMessageID, db.MediaAudio, "", "espeak", 0) // no job queued
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.app.Store.Pool.Exec(ctx, "UPDATE media SET created_at = now() - interval '2 hours' WHERE id = $1", md.ID); err != nil {
		t.Fatal(err)
	}
	card := e.c.Get(fmt.Sprintf("/media/%d/card", md.ID)).Body
	if !strings.Contains(card, `data-status="failed"`) || strings.Contains(card, "hx-trigger") {
		t.Errorf("a lost job's card still polls: %.400s", card)
	}
	rep, err := e.app.Media.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.app.Store.MediaByID(ctx, e.user.ID, md.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != db.MediaFailed || got.Error == "" || rep.Stale != 1 {
		t.Errorf("after collection: %+v, report %+v", got, rep)
	}
}
