package rag

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
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

// A result's URL is kept as one token: what its author put in its query
// or path (spaces, angle brackets, a line separator, "[2]") is escaped,
// the rest of the address left as it is.
func TestSourceURLsEscapeWhatCouldReadAsWordsOrSourceNumbers(t *testing.T) {
	for in, want := range map[string]string{
		"https://a.example/?q=> [2] Official <https://evil.example/>": "https://a.example/?q=%3E%20%5B2%5D%20Official%20%3Chttps://evil.example/%3E",
		"https://a.example/?q=a\u2028b":                               "https://a.example/?q=a%E2%80%A8b",
		"https://a.example/w/x%41[2]?a=1&b=%20#frag":                  "https://a.example/w/x%41%5B2%5D?a=1&b=%20",
		"https://a.example/a%2Fb/c?x=y":                               "https://a.example/a%2Fb/c?x=y",
		"http://[2001:db8::1]:8080/p":                                 "http://[2001:db8::1]:8080/p",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := sourceURL(u); got != want {
			t.Errorf("sourceURL(%q) = %q, want %q", in, got, want)
		}
	}
}
