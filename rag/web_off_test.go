package rag_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"weft/db"
	"weft/internal/testenv"
	"weft/internal/testwait"
	"weft/internal/usererr"
	"weft/rag"
)

// With knowledge from the web turned off (WEFT_KB_WEB=off) nothing is
// added or fetched again, and a fetch or crawl queued before (by an
// instance that had it on) settles with the reason without a request.
func TestWithTheWebTurnedOffNothingIsFetchedAndQueuedFetchesSayWhy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSite(t)
	s.html("/page", "Page", "<p>Zebras graze at dawn.</p>")
	store := testenv.NewDB(t)
	q := newQueue(t, store, map[string]int{rag.Queue: 0})
	e := newEnvOn(t, store, q, webConfig(rag.Config{WebOff: true}, s))
	kb := e.kb(e.user, e.ws, "Web", "embedder")
	if e.svc.WebOn() {
		t.Fatal("the service says the web is on")
	}

	want, _ := usererr.Message(rag.ErrWebOff)
	_, addErr := e.svc.AddFromWeb(ctx, e.user.ID, kb, rag.WebInput{URL: s.URL + "/page"}, 0)
	_, allErr := e.svc.RefetchAll(ctx, e.user.ID, kb, 0)
	for name, err := range map[string]error{"add": addErr, "re-fetch all": allErr} {
		if msg, ok := usererr.Message(err); !errors.Is(err, rag.ErrWebOff) || !ok || msg != want {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}

	// Queued as an instance with the web on queues them.
	added, _, err := store.AddWebPages(ctx, e.user.ID, kb.ID, []db.NewWebPage{{URL: s.URL + "/page", Name: "page"}},
		func(tx pgx.Tx, doc db.Document) error {
			return q.InsertTx(ctx, tx, rag.WebFetchArgs{DocumentID: doc.ID}, nil)
		})
	if err != nil || len(added) != 1 {
		t.Fatalf("add the page: %v, %d", err, len(added))
	}
	crawl, err := store.StartWebCrawl(ctx, e.user.ID, kb.ID, s.URL+"/", 10, 2, func(tx pgx.Tx, c db.WebCrawl) error {
		return q.InsertTx(ctx, tx, rag.WebCrawlArgs{CrawlID: c.ID}, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	d := e.settled(added[0])
	if d.Status != db.DocFailed || d.Error != "Fetching pages from the web is turned off on this server." {
		t.Errorf("the queued page: %s, %q", d.Status, d.Error)
	}
	var c db.WebCrawl
	testwait.For(t, "the queued crawl", 30*time.Second, func() bool {
		crawls, err := store.WebCrawls(ctx, e.user.ID, kb.ID, 1)
		if err != nil || len(crawls) != 1 {
			t.Fatalf("crawls: %v, %d", err, len(crawls))
		}
		c = crawls[0]
		return c.Status != db.CrawlRunning
	})
	if c.ID != crawl.ID || c.Status != db.CrawlFailed || c.Message != "Fetching pages from the web is turned off on this server." {
		t.Errorf("the queued crawl: %+v", c)
	}
	if err := e.svc.Refetch(ctx, e.user.ID, d.ID, 0); !errors.Is(err, rag.ErrWebOff) {
		t.Errorf("re-fetch: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.hits) != 0 {
		t.Errorf("the site got requests: %v", s.hits)
	}
}
