package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"weft/db"
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
