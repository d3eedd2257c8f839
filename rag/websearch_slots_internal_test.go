package rag

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"weft/internal/testwait"
	"weft/internal/webfetch"
)

// However many users search at once, the instance fetches at most
// webPagesAllAtOnce pages at the same time: the searches beyond wait for
// a slot (within their own time), instead of each opening its own three.
func TestPagesFetchedAtOnceAreCappedAcrossSearches(t *testing.T) {
	var now, peak atomic.Int64
	release := make(chan struct{})
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := now.Add(1)
		defer now.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "Tram 28 climbs through Alfama.")
	}))
	defer site.Close()
	s := &Service{pageSlots: make(chan struct{}, webPagesAllAtOnce)}
	s.cfg.Web = webfetch.Client{}.AllowForTest(netip.MustParseAddrPort(site.Listener.Addr().String()))

	searches := webPagesAllAtOnce/webPagesAtOnce + 2 // more pages than the cap, each search within its own
	var wg sync.WaitGroup
	for i := range searches {
		rs := make([]SearchResult, webPagesAtOnce)
		for j := range rs {
			rs[j].URL = fmt.Sprintf("%s/s%d/p%d", site.URL, i, j)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.readPages(context.Background(), rs)
		}()
	}
	if !testwait.Until(10*time.Second, func() bool { return now.Load() >= webPagesAllAtOnce }) {
		t.Fatalf("only %d pages were fetched at once", now.Load())
	}
	// Give the searches beyond the cap the time to open more requests, if
	// they could.
	testwait.Until(300*time.Millisecond, func() bool { return peak.Load() > webPagesAllAtOnce })
	close(release)
	wg.Wait()
	if p := peak.Load(); p != webPagesAllAtOnce {
		t.Errorf("%d pages were fetched at once, want at most %d", p, webPagesAllAtOnce)
	}
}
