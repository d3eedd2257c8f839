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
