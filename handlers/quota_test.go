package handlers_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"weft/db"
	"weft/handlers"
	"weft/internal/testenv"
	"weft/media"
)

// A user with as many read-aloud and image requests pending as allowed is
// told so by the read-aloud button and by /image, and nothing more is
// queued; the count is the database's, so it holds on every instance.
func TestMediaRequestsPerUserAreCappedWithAClearMessage(t *testing.T) {
	t.Parallel()
	e := newMediaEnv(t, testenv.Options{Media: media.Config{MaxPendingPerUser: 2}})
	ctx := context.Background()
	thread, _ := e.start("tiny", "hello", nil)
	run := waitIdle(t, e.app.Store, e.user.ID, thread)
	answer := *run.AssistantMessageID
	for range 2 { // pending, as if their jobs were queued on another instance
		if _, err := e.app.Store.AddMedia(ctx, e.user.ID, answer, db.MediaAudio, "", "espeak", 0); err != nil {
			t.Fatal(err)
		}
	}
	r := e.c.HTMX(fmt.Sprintf("/m/%d/speak", answer), url.Values{})
	if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "You already have 2 read-aloud or image requests being prepared") ||
		!strings.Contains(r.Body, `data-testid="media-notice"`) {
		t.Errorf("read aloud at the limit: %d %.300s", r.StatusCode, r.Body)
	}
	if err := e.app.Media.SaveSettings(ctx, media.Settings{ImageURL: "http://127.0.0.1:9/never-called"}); err != nil {
		t.Fatal(err)
	}
	r = e.c.HTMX(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"/image a lighthouse"}})
	if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "You already have 2 read-aloud or image requests being prepared") {
		t.Errorf("/image at the limit: %d %.300s", r.StatusCode, r.Body)
	}
	var n int
	if err := e.app.Store.Pool.QueryRow(ctx, "SELECT count(*) FROM media").Scan(&n); err != nil || n != 2 {
		t.Errorf("media rows after the refusals: %d (%v), want the 2 pending", n, err)
	}
	// Once one is done, the button works again.
	if _, err := e.app.Store.Pool.Exec(ctx, "UPDATE media SET status = 'failed' WHERE id = (SELECT min(id) FROM media)"); err != nil {
		t.Fatal(err)
	}
	if r := e.c.HTMX(fmt.Sprintf("/m/%d/speak", answer), url.Values{}); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `data-testid="media"`) {
		t.Errorf("read aloud under the limit: %d %.300s", r.StatusCode, r.Body)
	}
}

// A stored API key belongs to its endpoint: changing the address forgets
// it (unless a new key comes with it), and the admin page never shows it.
func TestTheMediaAPIKeyIsForgottenWhenItsEndpointChanges(t *testing.T) {
	t.Parallel()
	e := newMediaEnv(t, testenv.Options{})
	ctx := context.Background()
	save := func(form url.Values) media.Settings {
		t.Helper()
		if r := e.c.Post("/admin/media", form); r.StatusCode != http.StatusSeeOther {
			t.Fatalf("admin media: %d %.300s", r.StatusCode, r.Body)
		}
		st, err := e.app.Media.Settings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := save(url.Values{"tts_engine": {"openai"}, "tts_url": {"http://speech.example:8000"}, "tts_key": {"tts-sekret-1"},
		"image_url": {"http://images.example:7860"}, "image_key": {"img-sekret-1"}})
	if st.TTSKey != "tts-sekret-1" || st.ImageKey != "img-sekret-1" {
		t.Fatalf("keys not stored: %+v", st)
	}
	if page := e.c.Get("/admin").Body; strings.Contains(page, "tts-sekret-1") || strings.Contains(page, "img-sekret-1") {
		t.Errorf("the admin page shows an API key")
	}
	// Saved again with the same addresses and empty key fields: kept.
	st = save(url.Values{"tts_engine": {"openai"}, "tts_url": {"http://speech.example:8000"}, "image_url": {"http://images.example:7860"}})
	if st.TTSKey != "tts-sekret-1" || st.ImageKey != "img-sekret-1" {
		t.Fatalf("keys lost on a save that changed no address: %+v", st)
	}
	// New addresses: the speech key is forgotten; the image key typed in
	// with its new address is taken.
	st = save(url.Values{"tts_engine": {"openai"}, "tts_url": {"http://attacker.example:8000"},
		"image_url": {"http://images2.example:7860"}, "image_key": {"img-sekret-2"}})
	if st.TTSKey != "" || st.ImageKey != "img-sekret-2" {
		t.Errorf("after the addresses changed: tts key %q, image key %q; want none and the new one", st.TTSKey, st.ImageKey)
	}
	if page := e.c.Get("/admin").Body; strings.Contains(page, "img-sekret-2") {
		t.Errorf("the admin page shows the new API key")
	}
}

// storedFiles counts the files in the blob store.
func storedFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// notes is a Markdown document of about n bytes, distinct per topic.
func notes(topic string, n int) []byte {
	return []byte("# " + topic + "\n\n" + strings.Repeat(topic+" notes. ", n/(len(topic)+8)))
}

// A message that is refused stores nothing: the thread, the workspace and
// the model's vision are checked before any file is written.
func TestARefusedSendLeavesNoFileBehind(t *testing.T) {
	t.Parallel()
	e := newMediaEnv(t, testenv.Options{})
	ctx := context.Background()
	img := map[string][]byte{"dot.png": testPNG(t, 40, 30), "notes.md": notes("refused", 2000)}

	// An image to a model that cannot see.
	if r := sendFiles(t, e.c, "/t", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "model": {"tiny"}, "content": {"look"}}, img); r.StatusCode == http.StatusSeeOther ||
		!strings.Contains(r.Body, "cannot see images") {
		t.Fatalf("image to a text model: %d %.300s", r.StatusCode, r.Body)
	}
	// Someone else's thread, and someone else's workspace.
	other := testenv.NewClient(t, e.app.TS.URL)
	other.Register("other-sender@example.com", password)
	ou, err := e.app.Store.UserByEmail(ctx, "other-sender@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ows, err := e.app.Store.DefaultWorkspace(ctx, ou.ID)
	if err != nil {
		t.Fatal(err)
	}
	r := other.Post("/t", url.Values{"workspace_id": {fmt.Sprint(ows.ID)}, "content": {"mine"}})
	var theirs int64
	if _, err := fmt.Sscanf(r.Header.Get("Location"), "/t/%d", &theirs); err != nil {
		t.Fatalf("the other user's thread: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	if r := sendFiles(t, e.c, fmt.Sprintf("/t/%d/messages", theirs), url.Values{"model": {"vision"}, "content": {"in"}}, img); r.StatusCode != http.StatusNotFound {
		t.Errorf("files to another user's thread: %d, want 404", r.StatusCode)
	}
	if r := sendFiles(t, e.c, "/t", url.Values{"workspace_id": {fmt.Sprint(ows.ID)}, "model": {"vision"}, "content": {"in"}}, img); r.StatusCode != http.StatusNotFound {
		t.Errorf("files to another user's workspace: %d, want 404", r.StatusCode)
	}
	if n := storedFiles(t, e.app.Media.Blobs.(*media.Blobs).Dir); n != 0 {
		t.Errorf("refused sends left %d files in the blob store", n)
	}
	// The same files, acceptable, are stored.
	thread, r := e.start("vision", "look", img)
	if thread == 0 {
		t.Fatalf("an acceptable send: %d %.300s", r.StatusCode, r.Body)
	}
	atts := e.attachments(e.userMessage(thread).ID)
	if len(atts) != 2 {
		t.Fatalf("attachments of the accepted send: %+v", atts)
	}
	for _, a := range atts {
		f, err := e.app.Media.Blobs.Open(a.SHA256)
		if err != nil {
			t.Errorf("%s is not stored: %v", a.Name, err)
			continue
		}
		f.Close()
	}
}

// What one user stores (attachments, knowledge-base documents) is capped,
// with a message naming the limit; a file the user already stores costs
// nothing again.
func TestAUsersStorageIsCappedForAttachmentsAndKnowledgeBaseFiles(t *testing.T) {
	t.Parallel()
	e := newMediaEnv(t, testenv.Options{HTTP: handlers.Config{UserMaxBytes: 10 << 10}})
	ctx := context.Background()
	first := notes("first", 6<<10)
	thread, r := e.start("tiny", "keep", map[string][]byte{"first.md": first})
	if thread == 0 {
		t.Fatalf("a file under the limit: %d %.300s", r.StatusCode, r.Body)
	}
	waitIdle(t, e.app.Store, e.user.ID, thread)
	before := storedFiles(t, e.app.Media.Blobs.(*media.Blobs).Dir)
	r = sendFiles(t, e.c, fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"more"}}, map[string][]byte{"second.md": notes("second", 6<<10)})
	if r.StatusCode == http.StatusSeeOther || !strings.Contains(r.Body, "storage limit of 10 KB") {
		t.Fatalf("a file over the limit: %d %.400s", r.StatusCode, r.Body)
	}
	if n := storedFiles(t, e.app.Media.Blobs.(*media.Blobs).Dir); n != before {
		t.Errorf("the refused file was stored (%d files, %d before)", n, before)
	}
	// The same file again is already stored: it fits.
	r = sendFiles(t, e.c, fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"again"}}, map[string][]byte{"first-again.md": first})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("a file the user already stores: %d %.300s", r.StatusCode, r.Body)
	}
	waitIdle(t, e.app.Store, e.user.ID, thread)

	r = e.c.Post("/kb", url.Values{"name": {"Notes"}, "embed_model": {"embedder"}})
	var kb int64
	if _, err := fmt.Sscanf(r.Header.Get("Location"), "/kb/%d", &kb); err != nil {
		t.Fatalf("create knowledge base: %d %.200s", r.StatusCode, r.Body)
	}
	upload(t, e.c, kb, map[string]string{"big.md": string(notes("big", 5<<10))})
	if page := e.c.Get(fmt.Sprintf("/kb/%d", kb)).Body; !strings.Contains(page, "big.md: your files on this server would go over your storage limit of 10 KB") {
		t.Errorf("the knowledge base page does not say why big.md was refused: %.2000s", page)
	}
	upload(t, e.c, kb, map[string]string{"small.md": string(notes("small", 3<<10))})
	docs := waitDocs(t, e.app.Store, e.user.ID, kb)
	if len(docs) != 1 || docs[0].Name != "small.md" {
		t.Errorf("documents: %+v, want only small.md", docs)
	}
	used, _, err := e.app.Store.StorageUse(ctx, e.user.ID, nil)
	if err != nil || used > 10<<10 || used < 9<<10 {
		t.Errorf("stored bytes %d (%v), want about 9 KB", used, err)
	}
}
