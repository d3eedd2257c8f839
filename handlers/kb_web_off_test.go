package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"weft/db"
	"weft/internal/testenv"
	"weft/rag"
)

// WEFT_KB_WEB=off: a knowledge base's page has no "Add from the web" form
// and no Re-fetch, and every route of knowledge from the web answers 403
// with the reason; on (the default) they are there and work.
func TestTheAdministratorCanTurnKnowledgeFromTheWebOff(t *testing.T) {
	t.Parallel()
	const reason = "Adding pages from the web is turned off on this server (WEFT_KB_WEB=off)."
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("off=%v", off), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			site := newWebSite(t)
			site.set("/page", webPage("Local page", "Only reachable on this machine."))
			store := testenv.NewDB(t)
			app := testenv.Start(t, store, testenv.Options{RAG: rag.Config{WebOff: off}})
			c := testenv.NewClient(t, app.TS.URL)
			c.Register("web-off@example.com", password)
			if r := c.Post("/kb", url.Values{"name": {"Web"}, "embed_model": {"embedder"}}); r.StatusCode != http.StatusSeeOther {
				t.Fatalf("create = %d", r.StatusCode)
			}
			u, _ := store.UserByEmail(ctx, "web-off@example.com")
			ws, _ := store.Workspaces(ctx, u.ID)
			kbs, _ := store.KBs(ctx, u.ID, ws[0].ID)
			kb := fmt.Sprint(kbs[0].ID)
			// A page added while the web was on, whose fetch failed.
			added, _, err := store.AddWebPages(ctx, u.ID, kbs[0].ID, []db.NewWebPage{{URL: site.URL + "/page", Name: "page"}},
				func(pgx.Tx, db.Document) error { return nil })
			if err != nil || len(added) != 1 {
				t.Fatalf("add a page: %v, %d", err, len(added))
			}
			if err := store.FailWebFetch(ctx, added[0].ID, "It failed."); err != nil {
				t.Fatal(err)
			}
			doc := fmt.Sprint(added[0].ID)

			page := c.Get("/kb/" + kb).Body
			rows := c.Get("/kb/" + kb + "/documents").Body
			shown := map[string]bool{
				"the form":          strings.Contains(page, `data-testid="kb-web"`),
				"the crawls panel":  strings.Contains(page, `hx-get="/kb/`+kb+`/web"`),
				"re-fetch":          strings.Contains(rows, `data-testid="kb-refetch"`),
				"the note it's off": strings.Contains(page, `data-testid="kb-web-off"`),
			}
			for what, is := range shown {
				if want := off == (what == "the note it's off"); is != want {
					t.Errorf("%s shown: %v", what, is)
				}
			}
			if !strings.Contains(rows, `data-testid="kb-source-url"`) {
				t.Error("the web document's address is not shown")
			}

			for _, rt := range []struct {
				method, path string
				form         url.Values
				on           int
			}{
				{http.MethodPost, "/kb/" + kb + "/web", url.Values{"url": {site.URL + "/other"}, "scope": {"page"}}, http.StatusSeeOther},
				{http.MethodGet, "/kb/" + kb + "/web", nil, http.StatusOK},
				{http.MethodPost, "/kb/" + kb + "/documents/" + doc + "/refetch", url.Values{}, http.StatusSeeOther},
				{http.MethodPost, "/kb/" + kb + "/refetch", url.Values{}, http.StatusSeeOther},
			} {
				r := c.Do(rt.method, rt.path, rt.form)
				switch {
				case off && (r.StatusCode != http.StatusForbidden || !strings.Contains(r.Body, reason)):
					t.Errorf("%s %s = %d, want 403 saying %q:\n%s", rt.method, rt.path, r.StatusCode, reason, r.Body)
				case !off && r.StatusCode != rt.on:
					t.Errorf("%s %s = %d, want %d", rt.method, rt.path, r.StatusCode, rt.on)
				}
			}
			docs, err := store.Documents(ctx, u.ID, kbs[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{false: 2, true: 1}[off]; len(docs) != want {
				t.Errorf("%d documents, want %d", len(docs), want)
			}
		})
	}
}
