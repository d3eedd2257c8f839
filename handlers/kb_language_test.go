package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"weft/internal/testenv"
	"weft/internal/testwait"
)

func TestAKnowledgeBasesLanguageIsASettingItsChunksAreIndexedAgainIn(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	ctx := context.Background()
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("lang@example.com", password)
	u, err := app.Store.UserByEmail(ctx, "lang@example.com")
	if err != nil {
		t.Fatal(err)
	}
	r := c.Post("/kb", url.Values{"name": {"Reisen"}, "embed_model": {"embedder"}})
	var kbID int64
	fmt.Sscanf(r.Header.Get("Location"), "/kb/%d", &kbID)
	upload(t, c, kbID, map[string]string{"lisbon.md": tramGuide})
	waitDocs(t, app.Store, u.ID, kbID)
	page := fmt.Sprintf("/kb/%d", kbID)
	if body := c.Get(page).Body; !strings.Contains(body, `<option value="english" selected>English</option>`) {
		t.Fatalf("English is not the language shown by default")
	}

	// Not a language: refused with the list, nothing saved.
	if r := c.Post(page+"/settings", url.Values{"language": {"klingon"}, "top_k": {"9"}}); r.StatusCode != http.StatusBadRequest ||
		!strings.Contains(r.Body, "the language must be one of simple, arabic") {
		t.Errorf("an unknown language was not refused by name: %d", r.StatusCode)
	}
	if kb, _ := app.Store.KB(ctx, u.ID, kbID); kb.TopK == 9 || kb.Language != "english" {
		t.Errorf("a refused form saved something: top k %d, language %q", kb.TopK, kb.Language)
	}
	// Another user cannot change it.
	other := testenv.NewClient(t, app.TS.URL)
	other.Register("other-lang@example.com", password)
	if r := other.Post(page+"/settings", url.Values{"language": {"german"}}); r.StatusCode != http.StatusNotFound {
		t.Errorf("another user's post: %d", r.StatusCode)
	}

	if r := c.Post(page+"/settings", url.Values{"language": {"german"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving the language: %d", r.StatusCode)
	}
	if !testwait.Until(30*time.Second, func() bool {
		kb, err := app.Store.KB(ctx, u.ID, kbID)
		return err == nil && kb.Language == "german" && kb.PendingLanguage == ""
	}) {
		t.Fatal("the knowledge base never moved to German")
	}
	var lang string
	app.Store.Pool.QueryRow(ctx, "SELECT DISTINCT lang::text FROM kb_chunks WHERE kb_id = $1", kbID).Scan(&lang)
	if lang != "german" {
		t.Errorf("the chunks are indexed in %q", lang)
	}
	if body := c.Get(page).Body; !strings.Contains(body, `<option value="german" selected>German</option>`) {
		t.Errorf("German is not shown as the language")
	}
}
