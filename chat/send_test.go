package chat_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"weft/chat"
	"weft/db"
	"weft/internal/jobs"
	"weft/internal/usererr"
	"weft/media"
)

// fileEnv is an env whose runtime stores files in a temporary directory.
func fileEnv(t *testing.T, maxBytes int64, lim media.Limits) (*env, string) {
	t.Helper()
	dir := t.TempDir()
	e := newEnv(t, chat.Config{Instance: "unused"})
	queue, err := jobs.New(e.store.Pool, jobs.Config{Queues: map[string]int{media.Queue: 1}})
	if err != nil {
		t.Fatal(err)
	}
	files, err := media.NewService(e.store, queue, media.Config{DataDir: dir, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	e.rt = e.runtime(chat.Config{Files: files, UserMaxBytes: maxBytes})
	return e, dir
}

// filesIn counts the files written under dir.
func filesIn(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func smallPNG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestARefusedSendWritesNoFileAndNoMessage(t *testing.T) {
	t.Parallel()
	text := func(name string, n int) media.Upload {
		data := []byte(strings.Repeat("x", n))
		return media.Upload{Name: name, Data: data, Size: int64(n)}
	}
	cases := []struct {
		name     string
		maxBytes int64
		model    string
		files    func(t *testing.T) []media.Upload
		want     string
	}{
		{"an image for a model without vision", 0, "tiny",
			func(t *testing.T) []media.Upload { return []media.Upload{{Name: "a.png", Data: smallPNG(t)}} },
			"Message not sent: the model tiny cannot see images. Choose a model with vision (such as llava or a gemma3 model), or send the image without it."},
		{"files over the user's storage limit", 1000, "",
			func(*testing.T) []media.Upload { return []media.Upload{text("big.txt", 1500)} },
			"Message not sent: your files on this server would go over your storage limit of"},
		{"more files than a message takes", 0, "",
			func(*testing.T) []media.Upload {
				return []media.Upload{text("1.txt", 10), text("2.txt", 10), text("3.txt", 10)}
			},
			"Message not sent: 3 files; at most 2 a message."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, dir := fileEnv(t, tc.maxBytes, media.Limits{MaxFiles: 2})
			_, err := e.rt.Send(context.Background(), e.user.ID, chat.Input{WorkspaceID: e.ws.ID, Content: "look",
				Model: tc.model, Files: tc.files(t)})
			msg, _ := usererr.Message(err)
			if !errors.Is(err, chat.ErrRefused) || !strings.HasPrefix(msg, tc.want) {
				t.Fatalf("send = %v (message %q), want a refusal %q", err, msg, tc.want)
			}
			if n := filesIn(t, dir); n != 0 {
				t.Fatalf("the refused send wrote %d files", n)
			}
			var rows int
			if err := e.store.Pool.QueryRow(context.Background(), `SELECT count(*) FROM messages`).Scan(&rows); err != nil || rows != 0 {
				t.Fatalf("the refused send stored %d messages (%v)", rows, err)
			}
		})
	}
}

func TestAnAcceptedSendStoresItsFilesAndCommitsThemWithTheMessage(t *testing.T) {
	t.Parallel()
	e, dir := fileEnv(t, 0, media.Limits{})
	sent, err := e.rt.Send(context.Background(), e.user.ID, chat.Input{WorkspaceID: e.ws.ID, Model: "vision",
		Files: []media.Upload{{Name: "a.png", Data: smallPNG(t)}, {Name: "notes.txt", Data: []byte("some notes")}}})
	if err != nil {
		t.Fatal(err)
	}
	files, err := e.store.Attachments(context.Background(), e.user.ID, []int64{sent.User.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got := files[sent.User.ID]; len(got) != 2 || got[0].Kind != db.AttachImage || got[1].Name != "notes.txt" {
		t.Fatalf("attachments = %+v", got)
	}
	if n := filesIn(t, dir); n < 2 {
		t.Fatalf("%d files written, want the image, its thumbnail and the notes", n)
	}
	e.wait(sent)
}

func TestAnAttachedImageMustBeOneOfTheUsersReadyImages(t *testing.T) {
	t.Parallel()
	e, _ := fileEnv(t, 0, media.Limits{})
	_, err := e.rt.Send(context.Background(), e.user.ID, chat.Input{WorkspaceID: e.ws.ID, Content: "this", Media: []int64{987654}})
	if !errors.Is(err, chat.ErrNoSuchImage) {
		t.Fatalf("send with a missing image = %v", err)
	}
}
