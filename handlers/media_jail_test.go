package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"weft/internal/hostile"
	"weft/internal/testenv"
)

func TestASendWithAnXrefBombPDFIsRefusedNamingItAndTheServerStillAnswers(t *testing.T) {
	t.Parallel()
	e := newMediaEnv(t, testenv.Options{})
	thread, r := e.start("vision", "read both", map[string][]byte{
		"bomb.pdf":  hostile.XrefBomb(),
		"notes.txt": []byte("Notes that read fine."),
	})
	want := "bomb.pdf: This PDF could not be read: it needs more memory than Weft allows for one file."
	if thread != 0 || r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, want) {
		t.Fatalf("send: %d, body lacks %q: %.400s", r.StatusCode, want, r.Body)
	}
	if !strings.Contains(r.Body, "read both") {
		t.Errorf("the refused send lost the typed text")
	}
	var stored int
	if err := e.app.Store.Pool.QueryRow(context.Background(), "SELECT count(*) FROM attachments").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Errorf("%d attachments were stored for a refused send", stored)
	}
	// The server lives on: the other file goes through in the next send.
	thread, r = e.start("vision", "just the notes", map[string][]byte{"notes.txt": []byte("Notes that read fine.")})
	if thread == 0 {
		t.Fatalf("the next send: %d %.300s", r.StatusCode, r.Body)
	}
	atts := e.attachments(e.userMessage(thread).ID)
	if len(atts) != 1 || atts[0].Text != "Notes that read fine." {
		t.Errorf("attachments = %+v", atts)
	}
}
