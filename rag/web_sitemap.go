package rag

import (
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"io"
	"net/url"
	"strings"
)

// Reading sitemaps (sitemaps.org): a <urlset> lists pages, a
// <sitemapindex> lists more sitemaps; either may be gzipped. The parse is
// token by token with encoding/xml over a body already capped, keeping only
// the <loc> texts (each capped, and at most maxSitemapEntries of them);
// encoding/xml expands no entity a document defines and fetches nothing,
// so a sitemap costs what its bytes do. That bound is why it runs in the
// server's process rather than in extract's jail.

// Sitemap bounds.
const (
	maxSitemapBytes   = 10 << 20 // a sitemap's body, gzipped or not (the protocol allows 50 MB; real ones are far smaller)
	maxSitemapEntries = 50_000   // the protocol's own limit per file
	maxSitemapFetches = 50       // sitemaps one crawl reads
)

var errNotSitemap = errors.New("not a sitemap")

// sitemap is what one sitemap file lists.
type sitemap struct {
	pages    []string // <urlset>'s <url><loc>
	sitemaps []string // <sitemapindex>'s <sitemap><loc>
	rooted   bool     // a <urlset> or <sitemapindex> was found
}

// parseSitemap reads a sitemap or sitemap index (gzipped or not); anything
// else is errNotSitemap.
func parseSitemap(data []byte) (sitemap, error) {
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return sitemap{}, errNotSitemap
		}
		// Decompressed within the same cap: a gzip bomb stops there.
		if data, err = io.ReadAll(io.LimitReader(zr, maxSitemapBytes+1)); err != nil || len(data) > maxSitemapBytes {
			return sitemap{}, errNotSitemap
		}
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = false // real sitemaps carry stray '&'
	var out sitemap
	var stack []string
	var loc strings.Builder
	for len(out.pages)+len(out.sitemaps) < maxSitemapEntries {
		tok, err := dec.Token()
		if err != nil {
			break // the end, or a cut or broken end: keep what came before it
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) == 0 && t.Name.Local != "urlset" && t.Name.Local != "sitemapindex" {
				return sitemap{}, errNotSitemap
			}
			stack = append(stack, t.Name.Local)
			loc.Reset()
			out.rooted = true
		case xml.CharData:
			if len(stack) == 3 && stack[2] == "loc" && loc.Len() <= maxWebURL {
				loc.Write(t[:min(len(t), maxWebURL+1-loc.Len())])
			}
		case xml.EndElement:
			if len(stack) == 3 && stack[2] == "loc" {
				out.add(stack[0], stack[1], strings.TrimSpace(loc.String()))
			}
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
	if !out.rooted {
		return sitemap{}, errNotSitemap
	}
	return out, nil
}

// add keeps one <loc> found at root/entry/loc.
func (s *sitemap) add(root, entry, loc string) {
	if loc == "" || len(loc) > maxWebURL {
		return
	}
	switch {
	case root == "urlset" && entry == "url":
		s.pages = append(s.pages, loc)
	case root == "sitemapindex" && entry == "sitemap":
		s.sitemaps = append(s.sitemaps, loc)
	}
}

// siteScope is which pages a crawl takes: those of one site (its host, with
// or without "www."; its port) whose path starts with prefix.
type siteScope struct {
	host, port, prefix string
}

func newScope(u *url.URL, prefix string) siteScope {
	return siteScope{host: bareHost(u.Hostname()), port: u.Port(), prefix: prefix}
}

func bareHost(h string) string { return strings.TrimPrefix(strings.ToLower(h), "www.") }

// sameSite reports whether u is on the scope's site.
func (sc siteScope) sameSite(u *url.URL) bool {
	return bareHost(u.Hostname()) == sc.host && u.Port() == sc.port
}

// page checks a page's <loc>: an http(s) URL of the site under the prefix,
// returned without its fragment; ok false with the reason otherwise.
func (sc siteScope) page(loc string) (u *url.URL, offSite bool, ok bool) {
	u, err := webURL(loc)
	if err != nil {
		return nil, false, false
	}
	if !sc.sameSite(u) || !strings.HasPrefix(pathOf(u), sc.prefix) {
		return nil, true, false
	}
	return u, false, true
}

func pathOf(u *url.URL) string {
	if u.Path == "" {
		return "/"
	}
	return u.Path
}

// dirOf is the directory of a URL's path ("/docs/" for "/docs/intro").
func dirOf(u *url.URL) string {
	p := pathOf(u)
	return p[:strings.LastIndex(p, "/")+1]
}
