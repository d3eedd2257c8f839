package handlers_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"weft/db"
	"weft/internal/testenv"
	"weft/internal/testwait"
	"weft/media"
)

type mediaEnv struct {
	t    *testing.T
	app  *testenv.App
	c    *testenv.Client
	user db.User
	ws   db.Workspace
}

func newMediaEnv(t *testing.T, o testenv.Options) *mediaEnv {
	t.Helper()
	app := testenv.Start(t, testenv.NewDB(t), o)
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("media@example.com", password)
	ctx := context.Background()
	u, err := app.Store.UserByEmail(ctx, "media@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := app.Store.DefaultWorkspace(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	return &mediaEnv{t: t, app: app, c: c, user: u, ws: ws}
}

// start sends a first message with files and returns its thread (0 when
// refused, with the response).
func (e *mediaEnv) start(model, content string, files map[string][]byte) (int64, testenv.Response) {
	e.t.Helper()
	r := sendFiles(e.t, e.c, "/t", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "model": {model}, "content": {content}}, files)
	if r.StatusCode != http.StatusSeeOther {
		return 0, r
	}
	var thread int64
	fmt.Sscanf(r.Header.Get("Location"), "/t/%d", &thread)
	return thread, r
}

func (e *mediaEnv) userMessage(thread int64) db.Message {
	e.t.Helper()
	run := waitIdle(e.t, e.app.Store, e.user.ID, thread)
	m, err := e.app.Store.Message(context.Background(), e.user.ID, *run.UserMessageID)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *mediaEnv) attachments(msg int64) []db.Attachment {
	e.t.Helper()
	a, err := e.app.Store.Attachments(context.Background(), e.user.ID, []int64{msg})
	if err != nil {
		e.t.Fatal(err)
	}
	return a[msg]
}

// media waits for the answer's media to settle.
func (e *mediaEnv) media(msg int64, n int) []db.Media {
	e.t.Helper()
	var list []db.Media
	if !testwait.Until(30*time.Second, func() bool {
		m, err := e.app.Store.MediaOf(context.Background(), e.user.ID, []int64{msg})
		if err != nil {
			e.t.Fatal(err)
		}
		list = m[msg]
		done := len(list) >= n
		for _, md := range list {
			done = done && md.Status != db.MediaPending
		}
		return done
	}) {
		e.t.Fatalf("media of message %d: %+v", msg, list)
	}
	return list
}

func TestAttachmentsAreSniffedLimitedAndServedSafely(t *testing.T) {
	t.Parallel()
	e := newMediaEnv(t, testenv.Options{Media: media.Config{Limits: media.Limits{MaxFileBytes: 64 << 10, MaxFiles: 3}}})
	img := testPNG(t, 300, 200)
	htmlAsPNG := []byte("<!doctype html><html><body><script>alert(1)</script><p>Quarterly numbers</p></body></html>")
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)
	polyglot := append([]byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"), []byte("<script>alert(1)</script>")...)

	refusals := []struct {
		name  string
		files map[string][]byte
		want  string
	}{
		{"svg with a script", map[string][]byte{"logo.png": svg}, "SVG images are not accepted"},
		{"oversize", map[string][]byte{"big.txt": []byte(strings.Repeat("a", 70<<10))}, "the limit is 64 KB a file"},
		{"too many", map[string][]byte{"a.txt": []byte("a"), "b.txt": []byte("b"), "c.txt": []byte("c"), "d.txt": []byte("d")}, "at most 3"},
		{"executable", map[string][]byte{"tool.txt": []byte("\x7fELF\x02\x01\x01\x00\x00\x00binary\x00\x00")}, "tool.txt"},
		{"broken image", map[string][]byte{"pic.png": append([]byte("\x89PNG\r\n\x1a\n"), []byte("garbage garbage")...)}, "pic.png"},
		{"polyglot that is no real image", map[string][]byte{"x.gif": polyglot}, "x.gif"},
	}
	for _, tc := range refusals {
		thread, r := e.start("vision", "keep this text", tc.files)
		if thread != 0 || r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, tc.want) {
			t.Errorf("%s: %d, body lacks %q: %.300s", tc.name, r.StatusCode, tc.want, r.Body)
		}
		if !strings.Contains(r.Body, "keep this text") {
			t.Errorf("%s: the refused send lost the typed text", tc.name)
		}
	}

	thread, r := e.start("vision", "What is in these?", map[string][]byte{"chart.png": img, "report.png": htmlAsPNG})
	if thread == 0 {
		t.Fatalf("send: %d %.300s", r.StatusCode, r.Body)
	}
	q := e.userMessage(thread)
	atts := e.attachments(q.ID)
	if len(atts) != 2 {
		t.Fatalf("attachments = %+v", atts)
	}
	byName := map[string]db.Attachment{}
	for _, a := range atts {
		byName[a.Name] = a
	}
	if a := byName["chart.png"]; a.Kind != db.AttachImage || a.MIME != "image/png" || a.ThumbSHA == "" || a.Width != 300 {
		t.Errorf("the image = %+v", a)
	}
	if a := byName["report.png"]; a.Kind != db.AttachDocument || a.Format != "html" || !strings.Contains(a.Text, "Quarterly numbers") || strings.Contains(a.Text, "alert") {
		t.Errorf("HTML named .png = %+v, want a document read as text", a)
	}

	// Serving: raster images inline; everything else a download of opaque
	// bytes; never sniffed; sandboxed.
	img1 := e.c.Get(fmt.Sprintf("/attachments/%d", byName["chart.png"].ID))
	if img1.StatusCode != 200 || img1.Header.Get("Content-Type") != "image/png" || !strings.HasPrefix(img1.Header.Get("Content-Disposition"), "inline") ||
		img1.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(img1.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("image headers: %d %v", img1.StatusCode, img1.Header)
	}
	doc := e.c.Get(fmt.Sprintf("/attachments/%d", byName["report.png"].ID))
	if doc.Header.Get("Content-Type") != "application/octet-stream" || !strings.HasPrefix(doc.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("HTML is served as %q %q", doc.Header.Get("Content-Type"), doc.Header.Get("Content-Disposition"))
	}
	thumb := e.c.Get(fmt.Sprintf("/attachments/%d/thumb", byName["chart.png"].ID))
	if thumb.StatusCode != 200 || thumb.Header.Get("Content-Type") != "image/png" || len(thumb.Body) == 0 || len(thumb.Body) >= len(img) {
		t.Errorf("thumbnail: %d %q %d bytes", thumb.StatusCode, thumb.Header.Get("Content-Type"), len(thumb.Body))
	}
	page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	if strings.Count(page, `data-testid="attachment"`) != 2 {
		t.Errorf("the thread page does not show both attachments")
	}
	other := testenv.NewClient(t, e.app.TS.URL)
	other.Register("other-media@example.com", password)
	if r := other.Get(fmt.Sprintf("/attachments/%d", byName["chart.png"].ID)); r.StatusCode != http.StatusNotFound {
		t.Errorf("another user got the attachment: %d", r.StatusCode)
	}
}

func TestImagesGoToVisionModelsAndDocumentsAsText(t *testing.T) {
	t.Parallel()
	e := newMediaEnv(t, testenv.Options{})
	img := testPNG(t, 64, 64)
	pdf := testPDF("The launch is on Tuesday")
	thread, r := e.start("vision", "Summarize", map[string][]byte{"photo.png": img, "plan.pdf": pdf, "notes.md": []byte("# Notes\n\nBring the red folder.")})
	if thread == 0 {
		t.Fatalf("send: %d %.300s", r.StatusCode, r.Body)
	}
	e.userMessage(thread)
	// Files in the order they were sent (the form sends them sorted by name).
	req := trRequestFor(t, e.app.Fake, "Summarize\n\n[Attached document: notes.md]\n# Notes\n\nBring the red folder.\n[End of notes.md]\n\n[Attached document: plan.pdf]\nThe launch is on Tuesday\n[End of plan.pdf]")
	last := req.Messages[len(req.Messages)-1]
	if len(last.Images) != 1 || string(last.Images[0]) != string(img) {
		t.Errorf("the vision model got %d images", len(last.Images))
	}

	// The next turn sends the document's stored text again (read once).
	before := len(trStreamed(e.app.Fake))
	e.c.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"And when?"}})
	waitIdle(t, e.app.Store, e.user.ID, thread)
	reqs := trStreamed(e.app.Fake)
	if len(reqs) <= before || !strings.Contains(reqs[len(reqs)-1].Chat.Messages[1].Content, "The launch is on Tuesday") {
		t.Errorf("the document's text is not in the next turn's context")
	}

	// A model without vision: a clear refusal before anything is stored.
	if thread, r := e.start("tiny", "Look", map[string][]byte{"photo.png": img}); thread != 0 || r.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(r.Body, "the model tiny cannot see images") {
		t.Errorf("an image to a text model: %d %.300s", r.StatusCode, r.Body)
	}
	// Files alone are a message, and an edit of it may keep no text.
	only, r := e.start("tiny", "", map[string][]byte{"notes.md": []byte("Only a file")})
	if only == 0 {
		t.Fatalf("a message of files only was refused: %d %.300s", r.StatusCode, r.Body)
	}
	first := e.userMessage(only)
	if r := e.c.Post(fmt.Sprintf("/m/%d/edit", first.ID), url.Values{"content": {""}}); r.StatusCode != http.StatusSeeOther {
		t.Errorf("editing a files-only message to no text: %d %.200s", r.StatusCode, r.Body)
	}
	if edited := e.userMessage(only); edited.ID == first.ID || len(e.attachments(edited.ID)) != 1 {
		t.Errorf("the edited version %d does not keep the file", edited.ID)
	}
	if r := e.c.Post(fmt.Sprintf("/m/%d/edit", e.userMessage(thread).ID), url.Values{"content": {"  "}}); r.StatusCode != http.StatusBadRequest {
		t.Errorf("editing a message without files to no text: %d", r.StatusCode)
	}
}

func TestUnusedFilesAreCollectedAndDeletingReleasesThem(t *testing.T) {
	t.Parallel()
	e := newMediaEnv(t, testenv.Options{Media: media.Config{UnsentAfter: time.Millisecond}})
	ctx := context.Background()
	thread, _ := e.start("vision", "keep", map[string][]byte{"kept.png": testPNG(t, 400, 300)})
	kept := e.attachments(e.userMessage(thread).ID)[0]
	// An upload never sent (its send failed after the file was stored).
	orphan, err := e.app.Media.Blobs.Put([]byte("never sent"))
	if err != nil {
		t.Fatal(err)
	}
	unsent := func() int64 {
		var id int64
		if err := e.app.Store.Pool.QueryRow(ctx, `INSERT INTO attachments (owner_id, sha256, name, created_at)
			VALUES ($1, $2, 'x.txt', now() - interval '2 days') RETURNING id`, e.user.ID, orphan).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}()
	// Collect keeps files younger than UnsentAfter (1 ms here), which may
	// be still referenced a moment later: wait until the orphan is older.
	testwait.For(t, "the orphan file to be older than UnsentAfter", 0, func() bool {
		old := false
		_ = e.app.Media.Blobs.Walk(func(sha string, _ int64, mod time.Time) error {
			old = old || sha == orphan && time.Since(mod) > time.Millisecond
			return nil
		})
		return old
	})
	rep, err := e.app.Media.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Expired != 1 || rep.Removed != 1 || rep.Kept != 2 {
		t.Errorf("report = %+v, want 1 unsent attachment and 1 file removed, 2 kept (image and thumbnail)", rep)
	}
	if _, err := e.app.Media.Blobs.Read(orphan); err == nil {
		t.Errorf("the orphan file is still there")
	}
	if _, err := e.app.Store.AttachmentByID(ctx, e.user.ID, unsent); err == nil {
		t.Errorf("the unsent attachment is still there")
	}
	if _, err := e.app.Media.Blobs.Read(kept.SHA256); err != nil {
		t.Errorf("a referenced file was removed: %v", err)
	}
	if page := e.c.Get("/admin").Body; !strings.Contains(page, `data-testid="gc-report"`) {
		t.Errorf("the admin page does not report the clean-up")
	}
	// Deleting the thread releases its files at once.
	if r := e.c.Post(fmt.Sprintf("/t/%d/delete", thread), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete: %d", r.StatusCode)
	}
	for _, sha := range []string{kept.SHA256, kept.ThumbSHA} {
		if _, err := e.app.Media.Blobs.Read(sha); err == nil {
			t.Errorf("a deleted thread's file %s is still stored", sha[:8])
		}
	}
}

func TestReadAloudWithEspeakNGAttachesAudioToTheAnswer(t *testing.T) {
	t.Parallel()
	e := newMediaEnv(t, testenv.Options{})
	thread, _ := e.start("tiny", "Say something nice", nil)
	run := waitIdle(t, e.app.Store, e.user.ID, thread)
	answer := *run.AssistantMessageID
	if r := e.c.Post(fmt.Sprintf("/m/%d/speak", answer), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("speak: %d %s", r.StatusCode, r.Body)
	}
	list := e.media(answer, 1)
	if list[0].Status != db.MediaReady || list[0].Kind != db.MediaAudio || list[0].MIME != "audio/wav" || list[0].Engine != "espeak" {
		t.Fatalf("audio = %+v", list[0])
	}
	audio := e.c.Get(fmt.Sprintf("/media/%d", list[0].ID))
	if audio.Header.Get("Content-Type") != "audio/wav" || !strings.HasPrefix(audio.Body, "RIFF") || len(audio.Body) < 1000 ||
		!strings.HasPrefix(audio.Header.Get("Content-Disposition"), "inline") {
		t.Errorf("the audio: %q %q %d bytes", audio.Header.Get("Content-Type"), audio.Header.Get("Content-Disposition"), len(audio.Body))
	}
	page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	if !strings.Contains(page, `data-testid="media" data-media-id="`+fmt.Sprint(list[0].ID)) || !strings.Contains(page, `data-testid="read-aloud"`) {
		t.Errorf("the page lacks the audio or the read-aloud button")
	}

	// Automatic: every answer of the thread is read aloud.
	if r := e.c.Post(fmt.Sprintf("/t/%d/media", thread), url.Values{"tts": {"on"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("thread media: %d", r.StatusCode)
	}
	e.c.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"Again please"}})
	run = waitIdle(t, e.app.Store, e.user.ID, thread)
	if got := e.media(*run.AssistantMessageID, 1); got[0].Status != db.MediaReady || got[0].Kind != db.MediaAudio {
		t.Errorf("automatic read-aloud: %+v", got)
	}

	// A failing engine shows on the media, never on the text.
	if err := e.app.Media.SaveSettings(context.Background(), media.Settings{TTSEngine: "openai", TTSURL: "http://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	e.c.Post(fmt.Sprintf("/m/%d/speak", answer), nil)
	list = e.media(answer, 2)
	if list[1].Status != db.MediaFailed || list[1].Error == "" {
		t.Errorf("failed speech: %+v", list[1])
	}
	if m, _ := e.app.Store.Message(context.Background(), e.user.ID, answer); m.Status != db.MsgComplete || m.Error != "" {
		t.Errorf("a media failure touched the answer: %s %q", m.Status, m.Error)
	}
}

func TestImageGenerationThroughAnOpenAICompatibleEndpoint(t *testing.T) {
	t.Parallel()
	png := testPNG(t, 512, 512)
	var calls atomic.Int32
	var lastPrompt atomic.Value
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var body struct {
			Prompt string `json:"prompt"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		lastPrompt.Store(body.Prompt)
		if r.URL.Path != "/v1/images/generations" || r.Header.Get("Authorization") != "Bearer sekret" {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		if strings.Contains(body.Prompt, "forbidden") {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"error":{"message":"the image model is overloaded"}}`))
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"data": []map[string]string{{"b64_json": base64.StdEncoding.EncodeToString(png)}}})
	}))
	t.Cleanup(fake.Close)
	e := newMediaEnv(t, testenv.Options{})
	thread, _ := e.start("tiny", "hello", nil)
	waitIdle(t, e.app.Store, e.user.ID, thread)
	// Hidden until an admin configures it.
	if r := e.c.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"/image a lighthouse"}}); r.StatusCode != http.StatusUnprocessableEntity && !strings.Contains(r.Body, "not configured") {
		t.Errorf("/image without an endpoint: %d", r.StatusCode)
	}
	if r := e.c.Post("/admin/media", url.Values{"tts_engine": {"espeak"}, "image_url": {fake.URL}, "image_key": {"sekret"}, "image_model": {"sd"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin media: %d %s", r.StatusCode, r.Body)
	}
	if page := e.c.Get("/admin").Body; strings.Contains(page, "sekret") {
		t.Errorf("the admin page shows the API key")
	}
	r := e.c.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"/image a lighthouse at dawn"}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("/image: %d %s", r.StatusCode, r.Body)
	}
	var answer int64
	fmt.Sscanf(r.Header.Get("Location"), fmt.Sprintf("/t/%d#m%%d", thread), &answer)
	list := e.media(answer, 1)
	if list[0].Status != db.MediaReady || list[0].MIME != "image/png" || list[0].ThumbSHA == "" || lastPrompt.Load() != "a lighthouse at dawn" {
		t.Fatalf("image = %+v (prompt %v)", list[0], lastPrompt.Load())
	}
	if got := e.c.Get(fmt.Sprintf("/media/%d", list[0].ID)); got.Body != string(png) || got.Header.Get("Content-Type") != "image/png" {
		t.Errorf("the generated image is not served as stored")
	}
	page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	if !strings.Contains(page, `data-testid="media-image"`) || !strings.Contains(page, `data-attach-media="`+fmt.Sprint(list[0].ID)) {
		t.Errorf("the page does not show the image with its attach button")
	}

	// A failure shows on the media; the text stays.
	r = e.c.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"/image something forbidden"}})
	fmt.Sscanf(r.Header.Get("Location"), fmt.Sprintf("/t/%d#m%%d", thread), &answer)
	if got := e.media(answer, 1); got[0].Status != db.MediaFailed || !strings.Contains(got[0].Error, "overloaded") {
		t.Errorf("failed image: %+v", got[0])
	}
	if m, _ := e.app.Store.Message(context.Background(), e.user.ID, answer); m.Status != db.MsgComplete {
		t.Errorf("the failed image changed its message: %s", m.Status)
	}

	// Generated media can be attached to a later message (to a vision model).
	thread2, resp := e.start("vision", "What is this?", nil)
	_ = resp
	waitIdle(t, e.app.Store, e.user.ID, thread2)
	resp = sendFiles(t, e.c, fmt.Sprintf("/t/%d/messages", thread2), url.Values{"content": {"Describe it"}, "media": {fmt.Sprint(list[0].ID)}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("attach media: %d %s", resp.StatusCode, resp.Body)
	}
	q := e.userMessage(thread2)
	if atts := e.attachments(q.ID); len(atts) != 1 || atts[0].MediaID == nil || *atts[0].MediaID != list[0].ID {
		t.Errorf("attachments of the later message: %+v", atts)
	}
	if req := trRequestFor(t, e.app.Fake, "Describe it"); len(req.Messages[len(req.Messages)-1].Images) != 1 {
		t.Errorf("the attached image did not reach the vision model")
	}
	// Not to a model that cannot see it, and not with a command.
	resp = sendFiles(t, e.c, fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"Describe it"}, "media": {fmt.Sprint(list[0].ID)}}, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "the model tiny cannot see images") {
		t.Errorf("a generated image to a text model: %d %.200s", resp.StatusCode, resp.Body)
	}
	resp = sendFiles(t, e.c, fmt.Sprintf("/t/%d/messages", thread2), url.Values{"content": {"/title New"}, "media": {fmt.Sprint(list[0].ID)}}, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "Commands take no files") {
		t.Errorf("a command with files: %d %.200s", resp.StatusCode, resp.Body)
	}

	// Automatic: the thread's image option draws one for every answer.
	if r := e.c.Post(fmt.Sprintf("/t/%d/media", thread), url.Values{"image": {"on"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("thread media: %d", r.StatusCode)
	}
	e.c.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"a red bicycle"}})
	run := waitIdle(t, e.app.Store, e.user.ID, thread)
	if got := e.media(*run.AssistantMessageID, 1); got[0].Kind != db.MediaImage || got[0].Status != db.MediaReady || got[0].Prompt != "a red bicycle" {
		t.Errorf("automatic image: %+v", got)
	}

	// A fork keeps the files of the messages it copies.
	r = e.c.Post(fmt.Sprintf("/m/%d/fork", q.ID), nil)
	var fork int64
	fmt.Sscanf(r.Header.Get("Location"), "/t/%d", &fork)
	ft, err := e.app.Store.Thread(context.Background(), e.user.ID, fork)
	if err != nil || ft.ActiveLeafID == nil {
		t.Fatalf("fork: %d %v", r.StatusCode, err)
	}
	if atts := e.attachments(*ft.ActiveLeafID); len(atts) != 1 || atts[0].SHA256 != list[0].SHA256 {
		t.Errorf("the fork's copy of the message has attachments %+v", atts)
	}
}
