package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"weft/db"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// Over HTTP: a refused address says why on the page, an added one shows its
// row with the address and the fetch going on; the fetcher of a running
// server (no test address let through) refuses the local page, and the row
// says so.
func TestAddingFromTheWebShowsRefusalsAndEachPagesFetch(t *testing.T) {
	t.Parallel()
	site := newWebSite(t)
	site.set("/page", webPage("Local page", "Only reachable on this machine."))
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("web@example.com", password)
	if r := c.Post("/kb", url.Values{"name": {"Web"}, "embed_model": {"embedder"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("create = %d", r.StatusCode)
	}
	u, _ := store.UserByEmail(context.Background(), "web@example.com")
	ws, _ := store.Workspaces(context.Background(), u.ID)
	kbs, _ := store.KBs(context.Background(), u.ID, ws[0].ID)
	kb := fmt.Sprint(kbs[0].ID)

	for form, want := range map[string]string{
		"ftp://example.com/":               "Not added: Web fetch refused this URL: only http and https pages can be fetched, not ftp.",
		"https://example.com/|max_pages=0": "Not added: The number of pages must be a whole number from 1 to 1000.",
	} {
		addr, extra, _ := strings.Cut(form, "|")
		v := url.Values{"url": {addr}, "scope": {"sitemap"}}
		if k, val, ok := strings.Cut(extra, "="); ok {
			v.Set(k, val)
		}
		if r := c.Post("/kb/"+kb+"/web", v); r.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s: %d", form, r.StatusCode)
		}
		if page := c.Get("/kb/" + kb); !strings.Contains(page.Body, want) {
			t.Errorf("%s: the page does not say %q", form, want)
		}
	}

	if r := c.Post("/kb/"+kb+"/web", url.Values{"url": {site.URL + "/page"}, "scope": {"page"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("add = %d", r.StatusCode)
	}
	page := c.Get("/kb/" + kb)
	for _, want := range []string{"Fetching " + site.URL + "/page", `data-testid="kb-source-url"`, `href="` + site.URL + `/page"`} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
	docs := waitWebDocs(t, store, u.ID, kbs[0].ID)
	if len(docs) != 1 || docs[0].Status != db.DocFailed || !strings.Contains(docs[0].Error, "resolves to a private or local address") {
		t.Fatalf("documents: %+v", docs)
	}
	if rows := c.Get("/kb/" + kb + "/documents").Body; !strings.Contains(rows, "Web fetch blocked: 127.0.0.1") || !strings.Contains(rows, `data-testid="kb-refetch"`) {
		t.Errorf("the failed row does not say why or offer a re-fetch:\n%s", rows)
	}
}

// waitWebDocs waits until no web document is being fetched or ingested.
func waitWebDocs(t *testing.T, store *db.DB, user, kb int64) []db.Document {
	t.Helper()
	var docs []db.Document
	testwait.For(t, "the web documents", 30*time.Second, func() bool {
		var err error
		if docs, err = store.Documents(context.Background(), user, kb); err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if d.WebState != "" || d.Status == db.DocQueued || d.Status == db.DocProcessing {
				return false
			}
		}
		return true
	})
	return docs
}
