package rag

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"weft/db"
	"weft/extract"
	"weft/internal/usererr"
	"weft/internal/webfetch"
)

// Bounds of reading a search's pages.
const (
	webPageBytes       = 2 << 20          // one page's body (a longer one is read from its start)
	webPageTimeout     = 10 * time.Second // one page
	webPagesTime       = 25 * time.Second // all the pages of a search
	webPagesAtOnce     = 3                // pages fetched at the same time by one search
	webPagesAllAtOnce  = 12               // pages fetched at the same time by every search of the instance
	webPassageRunes    = 1200             // the passage taken from a page
	webPageTextRunes   = 200_000          // text read from one page
	webSnippetRunes    = 600              // a search snippet used as a source
	maxResultURLLength = 2000
)

// SearchWeb searches the web for query with the administrator's search
// service and returns its first pages' most relevant passages as numbered
// sources (from 1), within maxChars characters (the first always goes). A
// page that cannot be fetched or read is represented by the service's
// snippet, marked Snippet. No service set up: ErrWebSearchOff. A failure
// of the service is a usererr naming it; a cancelled ctx is returned as is.
func (s *Service) SearchWeb(ctx context.Context, query string, maxChars int) ([]db.Source, error) {
	w, err := s.WebSearchSettings(ctx)
	if err != nil {
		return nil, err
	}
	if !w.Configured() {
		return nil, ErrWebSearchOff
	}
	sr, err := s.searcher(w)
	if err != nil {
		return nil, err
	}
	query = strings.TrimSpace(query)
	if utf8.RuneCountInString(query) > 500 {
		query = string([]rune(query)[:500])
	}
	found, err := sr.Search(ctx, query, w.Results)
	if err != nil {
		return nil, err
	}
	results := usableResults(found, w.Results)
	if len(results) == 0 {
		return nil, nil
	}
	pages := s.readPages(ctx, results[:min(w.Pages, len(results))])
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("web search: %w", context.Cause(ctx))
	}
	terms := queryTerms(query)
	var out []db.Source
	spent := 0
	// As many sources as pages read; with no page read, the results'
	// summaries.
	limit := w.Pages
	if limit == 0 {
		limit = w.Results
	}
	for i, r := range results {
		src := db.Source{Document: r.Title, URL: r.URL}
		if i < len(pages) && pages[i].err == nil && len(pages[i].chunks) > 0 {
			p := pages[i]
			best := bestPassage(p.chunks, terms, pages)
			src.Text, src.Headings, src.Page, src.Position = best.Text, best.Headings, best.Page, best.Position
			src.URL = p.url
			if p.title != "" {
				src.Document = p.title
			}
		} else {
			if i < len(pages) && pages[i].err != nil {
				slog.Info("web search: page not read", "url", r.URL, "err", pages[i].err)
			}
			src.Text, src.Snippet = clipRunes(strings.Join(strings.Fields(r.Snippet), " "), webSnippetRunes), true
		}
		if src.Document == "" {
			src.Document = r.URL
		}
		src.Document, src.Text = uncite(src.Document), uncite(src.Text)
		if strings.TrimSpace(src.Text) == "" {
			continue
		}
		size := runes(src.Text)
		if len(out) > 0 && spent+size > maxChars {
			continue
		}
		spent += size
		src.N = len(out) + 1
		out = append(out, src)
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// citeLike is what an answer's citation looks like ([n], as chat reads
// them).
var citeLike = regexp.MustCompile(`\[(\d{1,3})\]`)

// uncite rewrites what looks like a citation in a page's words — a
// footnote marker ("capital[3]") or a forged source header ("[2] Official
// answer <https://…>") — as a footnote ([^3]): the numbers of the sources
// are Weft's, and a page cannot make the model cite, or believe in, a
// source it is not.
func uncite(s string) string { return citeLike.ReplaceAllString(s, "[^$1]") }

// usableResults keeps at most n results a page may be fetched from: http
// or https with a host and no user name, not too long, each URL once (a
// search service's javascript:, data: or file: URLs never become sources).
func usableResults(rs []SearchResult, n int) []SearchResult {
	seen := map[string]bool{}
	var out []SearchResult
	for _, r := range rs {
		if len(out) == n {
			break
		}
		if len(r.URL) > maxResultURLLength {
			continue
		}
		u, err := url.Parse(strings.TrimSpace(r.URL))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			continue
		}
		r.URL = sourceURL(u)
		if seen[r.URL] {
			continue
		}
		seen[r.URL] = true
		r.Title = clipRunes(usererr.Untrusted(r.Title, 300), 300)
		// Control characters (a NUL, which Postgres refuses in the
		// answer's sources) and direction overrides are left out.
		r.Snippet = usererr.Untrusted(r.Snippet, 4*webSnippetRunes)
		out = append(out, r)
	}
	return out
}

// sourceURL is a result's or page's URL as a source keeps it: without its
// fragment, and with what Go leaves as it came in a query (spaces, "<",
// ">", line separators) or a path ("[2]") escaped, so that a URL — which
// the page's author chooses — is one token in the sources the model reads
// ("<https://…>"), never words or a source number of its own.
func sourceURL(u *url.URL) string {
	u.Fragment, u.RawFragment = "", ""
	u.RawQuery = escapeQuery(u.RawQuery)
	if p := u.EscapedPath(); strings.ContainsAny(p, "[]") {
		u.RawPath = strings.NewReplacer("[", "%5B", "]", "%5D").Replace(p)
	}
	return u.String()
}

// escapeQuery percent-encodes every byte of a raw query that RFC 3986
// does not allow in one (escapes already there are kept).
func escapeQuery(q string) string {
	const allowed = "-._~!$&'()*+,;=:@/?%"
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c < utf8.RuneSelf && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(allowed, c) >= 0) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// readPage is one result's page as read.
type readPage struct {
	url, title string
	chunks     []Chunk
	err        error
}

// readPages fetches and reads pages through webfetch (its address policy:
// a result on a private or local address is never fetched), a few at a
// time — and no more than webPagesAllAtOnce for all the searches of the
// instance, however many users search at once — each bounded, all within
// webPagesTime; Stop (ctx) ends them all.
func (s *Service) readPages(ctx context.Context, rs []SearchResult) []readPage {
	ctx, cancel := context.WithTimeout(ctx, webPagesTime)
	defer cancel()
	client := s.cfg.Web
	client.MaxBytes, client.Timeout = webPageBytes, webPageTimeout
	out := make([]readPage, len(rs))
	sem := make(chan struct{}, webPagesAtOnce)
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				out[i].err = ctx.Err()
				return
			}
			defer func() { <-sem }()
			if s.pageSlots != nil {
				select {
				case s.pageSlots <- struct{}{}:
				case <-ctx.Done():
					out[i].err = ctx.Err()
					return
				}
				defer func() { <-s.pageSlots }()
			}
			out[i] = readOnePage(ctx, client, r.URL)
		}()
	}
	wg.Wait()
	return out
}

func readOnePage(ctx context.Context, client webfetch.Client, rawURL string) readPage {
	resp, err := client.Get(ctx, webfetch.Request{URL: rawURL})
	if err != nil {
		return readPage{err: err}
	}
	u, err := webfetch.CheckURL(resp.URL)
	if err != nil {
		return readPage{err: err}
	}
	p := readPage{url: sourceURL(u)}
	_, data, format, err := pageContent(resp)
	if err != nil {
		return readPage{err: err}
	}
	if format == FormatHTML {
		p.title = usererr.Untrusted(webfetch.Title(string(data)), 300)
	}
	blocks, err := extract.Read(ctx, format, data, extract.Limits{MaxText: webPageTextRunes})
	if err != nil && !errors.Is(err, extract.ErrTooLarge) {
		return readPage{err: err}
	}
	p.chunks = Split(blocks, ChunkOptions{Size: webPassageRunes, Overlap: -1})
	return p
}

// queryTerms are the query's words, lower case, without the commonest.
func queryTerms(q string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) }) {
		if utf8.RuneCountInString(w) < 2 || stopWords[w] || seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
	}
	return out
}

var stopWords = map[string]bool{
	"the": true, "and": true, "or": true, "of": true, "to": true, "in": true, "on": true, "for": true, "is": true,
	"are": true, "was": true, "what": true, "which": true, "who": true, "how": true, "why": true, "when": true,
	"where": true, "does": true, "do": true, "an": true, "a": true, "it": true, "its": true, "be": true, "by": true,
	"with": true, "at": true, "as": true, "from": true, "that": true, "this": true, "can": true, "there": true,
}

// bestPassage is the chunk of a page whose words match the query best:
// each query word it holds counts by its rarity across every page read
// (a word on every page counts little) and, less, by how often it occurs;
// ties go to the earlier chunk.
func bestPassage(chunks []Chunk, terms []string, pages []readPage) Chunk {
	if len(terms) == 0 {
		return chunks[0]
	}
	total, df := 0, make(map[string]int, len(terms))
	lower := func(c Chunk) string { return strings.ToLower(c.Text) }
	for _, p := range pages {
		for _, c := range p.chunks {
			total++
			t := lower(c)
			for _, w := range terms {
				if strings.Contains(t, w) {
					df[w]++
				}
			}
		}
	}
	best, bestScore := chunks[0], 0.0
	for _, c := range chunks {
		t, score := lower(c), 0.0
		for _, w := range terms {
			if tf := strings.Count(t, w); tf > 0 {
				idf := math.Log(1 + float64(total)/float64(df[w]))
				score += idf * (1 + math.Log(float64(tf))/4)
			}
		}
		if score > bestScore {
			best, bestScore = c, score
		}
	}
	return best
}
