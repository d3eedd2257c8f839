package rag

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"weft/internal/hostile"
	"weft/internal/webfetch"
)

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestParseSitemapReadsPagesIndexesAndGzipAndRefusesTheRest(t *testing.T) {
	t.Parallel()
	set := `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
		<url><loc> https://example.com/a?x=1&amp;y=2 </loc></url><url><loc>https://example.com/b</loc><priority>1</priority></url></urlset>`
	got, err := parseSitemap([]byte(set))
	if err != nil || strings.Join(got.pages, " ") != "https://example.com/a?x=1&y=2 https://example.com/b" || len(got.sitemaps) != 0 {
		t.Errorf("urlset: %+v, %v", got, err)
	}
	index := `<sitemapindex><sitemap><loc>https://example.com/s1.xml</loc></sitemap><url><loc>https://example.com/stray</loc></url></sitemapindex>`
	if got, err = parseSitemap(gzipped(t, index)); err != nil || strings.Join(got.sitemaps, " ") != "https://example.com/s1.xml" || len(got.pages) != 0 {
		t.Errorf("gzipped index: %+v, %v", got, err)
	}
	// A sitemap cut off half-way keeps what came before the cut.
	if got, err = parseSitemap([]byte(set[:strings.Index(set, "<url><loc>https://example.com/b")+20])); err != nil || len(got.pages) != 1 {
		t.Errorf("a cut sitemap: %+v, %v", got, err)
	}
	for name, data := range map[string][]byte{
		"html":         []byte("<!doctype html><html><body><urlset></urlset></body></html>"),
		"text":         []byte("https://example.com/a\nhttps://example.com/b\n"),
		"empty":        nil,
		"broken gzip":  {0x1f, 0x8b, 0x08, 0x00},
		"rss":          []byte(`<?xml version="1.0"?><rss><channel><item><link>https://example.com/a</link></item></channel></rss>`),
		"gzipped html": gzipped(t, "<html><body>hi</body></html>"),
	} {
		if _, err := parseSitemap(data); err != errNotSitemap {
			t.Errorf("%s: err = %v, want errNotSitemap", name, err)
		}
	}
}

func TestParseSitemapStaysWithinItsBounds(t *testing.T) {
	t.Parallel()
	// A gzip bomb: 60 MB of zeros inside, more than a sitemap may be.
	bomb := gzipped(t, "<urlset>"+strings.Repeat(" ", 60<<20))
	if _, err := parseSitemap(bomb); err != errNotSitemap {
		t.Errorf("the gzip bomb: %v", err)
	}
	var b strings.Builder
	b.WriteString("<urlset>")
	b.WriteString("<url><loc>https://example.com/" + strings.Repeat("x", maxWebURL) + "</loc></url>")
	for range maxSitemapEntries + 10 {
		b.WriteString("<url><loc>https://example.com/p</loc></url>")
	}
	got, err := parseSitemap([]byte(b.String() + "</urlset>"))
	if err != nil || len(got.pages) != maxSitemapEntries {
		t.Fatalf("%d pages, %v; want the first %d", len(got.pages), err, maxSitemapEntries)
	}
	for _, p := range got.pages {
		if len(p) > maxWebURL {
			t.Fatalf("a %d-byte address was kept", len(p))
		}
	}
}

func TestPageContentNamesAPageSoThatIngestionReadsItAsItsServerSaid(t *testing.T) {
	t.Parallel()
	pdf := hostile.PDFPages("BT /F1 12 Tf 72 720 Td (Hello) Tj ET")
	tests := []struct {
		url, mediaType, body string
		name, format, err    string
	}{
		{url: "https://example.com/docs/", mediaType: "text/html", body: "<html><head><title> The\n Guide </title></head><p>x</p></html>", name: "The Guide", format: FormatHTML},
		{url: "https://example.com/frag", mediaType: "text/html", body: "<p>only a fragment</p>", name: "example.com/frag", format: FormatHTML},
		{url: "https://example.com/", mediaType: "text/plain", body: "hello", name: "example.com/", format: FormatText},
		{url: "https://example.com/README.md", mediaType: "text/plain", body: "# Title", name: "example.com/README.md", format: FormatMarkdown},
		{url: "https://example.com/notes", mediaType: "text/markdown", body: "# Notes", name: "example.com/notes.md", format: FormatMarkdown},
		{url: "https://example.com/data", mediaType: "text/csv", body: "a,b\n1,2\n", name: "example.com/data.csv", format: FormatCSV},
		{url: "https://example.com/paper", mediaType: "application/octet-stream", body: string(pdf), name: "example.com/paper", format: FormatPDF},
		{url: "https://example.com/paper.pdf", mediaType: "application/pdf", body: "not a pdf at all", err: "holds plain text, not what its name says"},
		{url: "https://example.com/api", mediaType: "application/json", body: `{"a":1}`, err: "application/json, which a knowledge base cannot read"},
		{url: "https://example.com/empty", mediaType: "text/html", body: "", err: "the page is empty"},
		{url: "https://example.com/%E2%80%AEevil", mediaType: "text/plain", body: "x", name: "example.com/evil", format: FormatText},
	}
	for _, tt := range tests {
		name, data, format, err := pageContent(&webfetch.Response{URL: tt.url, MediaType: tt.mediaType, Body: []byte(tt.body)})
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err = %v, want %q", tt.url, err, tt.err)
			}
			continue
		}
		if err != nil || name != tt.name || format != tt.format {
			t.Errorf("%s: %q as %q (%v), want %q as %q", tt.url, name, format, err, tt.name, tt.format)
		}
		if tt.format == FormatHTML && !bytes.HasSuffix(data, []byte(tt.body)) {
			t.Errorf("%s: the page's bytes were changed: %q", tt.url, data)
		}
	}
}
