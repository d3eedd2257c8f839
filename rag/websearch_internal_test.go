package rag

import (
	"strings"
	"testing"
)

// Only http(s) pages with a host and no user name become sources, each URL
// (without its fragment) once, at most n; titles are one clean line.
func TestUsableResultsKeepOnlyWebPagesOnceAndAtMostN(t *testing.T) {
	in := []SearchResult{
		{URL: "javascript:alert(1)"}, {URL: "data:text/html,x"}, {URL: "file:///etc/passwd"}, {URL: "ftp://x.example/"},
		{URL: "https://user:pw@x.example/"}, {URL: "http:///nohost"}, {URL: "https://x.example/" + strings.Repeat("a", 3000)},
		{URL: "https://a.example/page#top", Title: "A\nline\u202e"}, {URL: "https://a.example/page"}, {URL: "http://b.example/"},
		{URL: "http://c.example/"},
	}
	got := usableResults(in, 2)
	if len(got) != 2 || got[0].URL != "https://a.example/page" || got[1].URL != "http://b.example/" {
		t.Fatalf("kept %+v", got)
	}
	if got[0].Title != "A line" {
		t.Errorf("title %q", got[0].Title)
	}
}

// The passage chosen from a page is the one holding the query's rarest
// words, not the first one.
func TestBestPassagePrefersTheRareQueryWords(t *testing.T) {
	chunks := []Chunk{{Text: "Lisbon is a city. Lisbon has hills."}, {Text: "Tram 28 climbs through Alfama."}, {Text: "Lisbon food."}}
	pages := []readPage{{chunks: chunks}}
	if got := bestPassage(chunks, queryTerms("Which tram goes through Alfama in Lisbon?"), pages); got.Text != chunks[1].Text {
		t.Errorf("best = %q", got.Text)
	}
	if got := bestPassage(chunks, nil, pages); got.Text != chunks[0].Text {
		t.Errorf("no words: %q", got.Text)
	}
}
