package handlers_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// A request that was open while another stored something in the session
// (a title poll, while a command put its flash) must not write its older
// copy of the session back when it ends.
func TestALongRequestEndingLaterDoesNotUndoWhatAnotherStoredInTheSession(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	fake := fakeollama.New(t, fakeollama.WithScript(func(req *api.ChatRequest) fakeollama.Reply {
		if req.Stream != nil && !*req.Stream { // the title request waits for the test
			<-release
			return fakeollama.Reply{Chunks: []string{"Lisbon"}}
		}
		return fakeollama.Reply{Chunks: []string{"An ", "answer."}}
	}))
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{Fake: fake})
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("flash@example.com", password)
	ws := regexp.MustCompile(`name="workspace_id" value="(\d+)"`).FindStringSubmatch(c.Get("/").Body)
	r := c.Post("/t", url.Values{"workspace_id": {ws[1]}, "content": {"hello"}})
	thread := regexp.MustCompile(`^/t/(\d+)`).FindStringSubmatch(r.Header.Get("Location"))[1]

	// The page's title poll: it holds the session loaded while it waits.
	polled := make(chan error, 1)
	go func() {
		hc := *c.HTTP
		hc.Timeout = time.Minute
		resp, err := hc.Get(c.Base + "/t/" + thread + "/title")
		if err == nil {
			resp.Body.Close()
		}
		polled <- err
	}()
	testwait.For(t, "the title poll to wait", 20*time.Second, func() bool { return app.RT.TitleWaiters() > 0 })

	if r := c.HTMX("/t/"+thread+"/messages", url.Values{"content": {"/model tiny"}}); r.StatusCode >= 400 {
		t.Fatalf("/model = %d %s", r.StatusCode, r.Body)
	}
	close(release) // the title arrives; the poll answers and ends
	if err := <-polled; err != nil {
		t.Fatalf("title poll: %v", err)
	}

	page := c.Get("/t/" + thread)
	if !strings.Contains(page.Body, "This thread now answers with") {
		t.Fatalf("the command's flash was lost to the title poll that ended after it (status %d)", page.StatusCode)
	}
}
