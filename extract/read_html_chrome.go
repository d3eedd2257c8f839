package extract

import (
	"iter"
	"strings"
)

// chromeWhere says where a class, id or role marks an element as chrome.
type chromeWhere uint8

const (
	chromeAnywhere       chromeWhere = iota + 1 // even inside <main> or <article>
	chromeOutsideContent                        // only outside them: inside, the same word is content (docutils' <aside class="sidebar">)
)

// htmlChromeRoles are ARIA landmark roles of page chrome.
var htmlChromeRoles = map[string]chromeWhere{
	"navigation": chromeAnywhere, "banner": chromeAnywhere, "contentinfo": chromeAnywhere,
	"complementary": chromeAnywhere, "search": chromeAnywhere,
}

// htmlChromeTokens are class and id tokens (whole, any case) of chrome:
// generic words and those of the common documentation generators.
var htmlChromeTokens = map[string]chromeWhere{
	// generic
	"toc": chromeAnywhere, "table-of-contents": chromeAnywhere, "breadcrumb": chromeAnywhere,
	"breadcrumbs": chromeAnywhere, "skip-link": chromeAnywhere, "skiplink": chromeAnywhere,
	"skip-to-content": chromeAnywhere, "edit-this-page": chromeAnywhere, "pagination": chromeAnywhere,
	"sidebar": chromeOutsideContent, "menu": chromeOutsideContent, "navbar": chromeOutsideContent,
	"navigation": chromeOutsideContent, "header": chromeOutsideContent, "footer": chromeOutsideContent,
	"site-header": chromeOutsideContent, "site-footer": chromeOutsideContent, "related": chromeOutsideContent,
	// Sphinx: sidebars, the "¶" link of every heading and definition
	"sphinxsidebar": chromeAnywhere, "headerlink": chromeAnywhere,
	// DocBook (PostgreSQL, the Debian Reference): "Prev | Up | Next | Home" tables
	"navheader": chromeAnywhere, "navfooter": chromeAnywhere,
	// Read the Docs theme
	"wy-nav-side": chromeAnywhere, "wy-breadcrumbs": chromeAnywhere, "rst-footer-buttons": chromeAnywhere,
	"rst-versions": chromeAnywhere,
	// MkDocs Material
	"md-header": chromeAnywhere, "md-tabs": chromeAnywhere, "md-sidebar": chromeAnywhere,
	"md-footer": chromeAnywhere, "md-skip": chromeAnywhere,
	// Docusaurus
	"theme-doc-breadcrumbs": chromeAnywhere, "theme-doc-toc-mobile": chromeAnywhere,
	"theme-doc-toc-desktop": chromeAnywhere, "theme-edit-this-page": chromeAnywhere,
	"theme-doc-footer": chromeAnywhere, "pagination-nav": chromeAnywhere,
	// Hugo themes (Docsy, Book)
	"td-sidebar": chromeAnywhere, "td-sidebar-toc": chromeAnywhere, "td-page-meta": chromeAnywhere,
	"book-menu": chromeAnywhere, "book-toc": chromeAnywhere,
}

// maxChromeToken is the longest token in htmlChromeTokens and
// htmlChromeRoles; longer tokens are not looked up.
const maxChromeToken = 24

// chromeIn says where the strongest of the space-separated tokens of an
// attribute value, in any case, marks chrome in table (0: nowhere).
func chromeIn(v []byte, table map[string]chromeWhere) chromeWhere {
	var best chromeWhere
	for tok := range htmlTokens(v) {
		if len(tok) > maxChromeToken {
			continue
		}
		var buf [maxChromeToken]byte
		for i, c := range tok {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			buf[i] = c
		}
		if w := table[string(buf[:len(tok)])]; w == chromeAnywhere {
			return w
		} else if w > best {
			best = w
		}
	}
	return best
}

// hasToken says whether an attribute value holds the token, in any case.
func hasToken(v []byte, token string) bool {
	for tok := range htmlTokens(v) {
		if strings.EqualFold(string(tok), token) {
			return true
		}
	}
	return false
}

// htmlTokens yields the tokens of an attribute value separated by HTML
// white space.
func htmlTokens(v []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		start := -1
		for i := 0; i <= len(v); i++ {
			space := i == len(v) || v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r' || v[i] == '\f'
			switch {
			case space && start >= 0:
				if !yield(v[start:i]) {
					return
				}
				start = -1
			case !space && start < 0:
				start = i
			}
		}
	}
}

// htmlCounts are what the first pass over a page measures, in bytes of
// text other than white space.
type htmlCounts struct {
	all      int // outside hidden elements
	kept     int // and outside chrome
	main     int // and inside <main> or role=main
	article  int // and inside an <article> not inside those
	mains    int // outermost <main> and role=main elements
	articles int // outermost <article> elements
}

// mode chooses what to read: <main> where the page has one, its <article>
// where it has exactly one, else the body without chrome; but a part that
// holds almost no text (a <main> a script fills in, a page whose every
// block has a class the rules take for chrome) gives way to the whole.
func (c *htmlCounts) mode() htmlMode {
	switch {
	case c.mains > 0 && !almostNone(c.main, c.kept):
		return modeMain
	case c.mains == 0 && c.articles == 1 && !almostNone(c.article, c.kept):
		return modeArticle
	case !almostNone(c.kept, c.all):
		return modeBody
	}
	return modeAll
}

// minPartText is the text (about 90 words) a part of a page needs to be
// read alone when it holds less than a fifth of the whole's.
const minPartText = 500

func almostNone(part, whole int) bool { return part < minPartText && part*5 < whole }

// countText counts a text token of the first pass.
func (s *htmlScope) countText(b []byte) {
	if s.hiddenN > 0 {
		return
	}
	n := 0
	for _, c := range b {
		if c != ' ' && c != '\n' && c != '\t' && c != '\r' && c != '\f' {
			n++
		}
	}
	s.counts.all += n
	if s.chrome.open() {
		return
	}
	s.counts.kept += n
	switch {
	case s.content.open() && s.content.main:
		s.counts.main += n
	case s.content.open():
		s.counts.article += n
	}
}
