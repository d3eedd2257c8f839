package extract

import (
	"golang.org/x/net/html/atom"
)

// The HTML reader keeps a page's content and leaves out its chrome: the
// navigation bars, headers, footers, sidebars, tables of contents and
// "Prev | Up | Next" links that every page of a site repeats. Indexed, they
// match every question about the site equally well and crowd out the
// passages that answer it.
//
// Everything here works on the tokenizer's stream alone, with no tree: an
// element left out (or read alone, like <main>) is followed to its end tag
// by counting the start and end tags of its own name (htmlRegion), which
// costs a few words of memory however deep or broken the page is.

// htmlMode is the part of a page the reader keeps, chosen by a first pass
// over the page (htmlCounts.mode).
type htmlMode int

const (
	modeAll     htmlMode = iota // all text but hidden elements (scripts, styles …): a page with no usable structure
	modeBody                    // all text but chrome
	modeMain                    // only the text of <main> and role=main elements, without chrome inside them
	modeArticle                 // only the text of the page's one <article>, without chrome inside it
)

const (
	// kindHidden: an element whose text is never content: code, styling,
	// embedded images and formulas, form controls' options, the <title>.
	kindHidden uint8 = 1 << iota
	// kindVoid: an element that never has an end tag.
	kindVoid
	// kindContainer: an element whose class, id or role may make it chrome
	// or the main content. Only elements whose end tag is never left out
	// (an unclosed <li class="menu">, followed by counting, would hide the
	// rest of the page) and that hold blocks or links: the chrome of real
	// pages is made of these. Inline formatting (<span>, <code> …) is never
	// chrome, and its attributes are not even read.
	kindContainer
)

// htmlKind says what an element is to the scope. A switch, not a map: it
// runs for every tag, twice.
func htmlKind(a atom.Atom) uint8 {
	switch a {
	case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Title, atom.Svg, atom.Math,
		atom.Iframe, atom.Object, atom.Textarea, atom.Select, atom.Noembed, atom.Noframes:
		return kindHidden
	case atom.Area, atom.Base, atom.Br, atom.Col, atom.Embed, atom.Hr, atom.Img, atom.Input, atom.Link,
		atom.Meta, atom.Param, atom.Source, atom.Track, atom.Wbr, atom.Keygen:
		return kindVoid
	case atom.Div, atom.Section, atom.Nav, atom.Aside, atom.Header, atom.Footer, atom.Main,
		atom.Article, atom.Ul, atom.Ol, atom.Dl, atom.Menu, atom.Table, atom.A, atom.Form, atom.Button,
		atom.Details, atom.Figure, atom.Dialog:
		return kindContainer
	}
	return 0
}

// htmlRegion follows one open element to its end tag by counting the
// start and end tags of its name.
type htmlRegion struct {
	name  string
	depth int // 0: closed
	main  bool
}

func (g *htmlRegion) open() bool { return g.depth > 0 }

func (g *htmlRegion) begin(name []byte, main bool) { g.name, g.depth, g.main = string(name), 1, main }

// start counts a start tag inside the region.
func (g *htmlRegion) start(name []byte) {
	if string(name) == g.name {
		g.depth++
	}
}

// end counts an end tag inside the region and says whether it closed it.
func (g *htmlRegion) end(name []byte) bool {
	if string(name) == g.name {
		g.depth--
		return g.depth == 0
	}
	return false
}

// htmlTag is a start tag as the scope needs it.
type htmlTag struct {
	name        []byte
	a           atom.Atom
	selfClosing bool
	class, id   []byte
	role        []byte
}

// htmlScope says, tag by tag, whether the reader is in content.
type htmlScope struct {
	mode    htmlMode
	hidden  map[atom.Atom]int // open hidden elements
	hiddenN int               // sum of hidden
	chrome  htmlRegion        // the outermost open chrome element
	content htmlRegion        // the outermost open <main>, role=main or <article>
	counts  htmlCounts        // of the first pass
}

func newHTMLScope(mode htmlMode) *htmlScope {
	return &htmlScope{mode: mode, hidden: map[atom.Atom]int{}}
}

// start takes a start tag and says whether the reader reads it, and whether
// it began chrome that breaks the paragraph (a block left out).
func (s *htmlScope) start(t *htmlTag) (keep, brk bool) {
	kind := htmlKind(t.a)
	void := t.selfClosing || kind&kindVoid != 0
	if !void {
		if s.chrome.open() {
			s.chrome.start(t.name)
		}
		if s.content.open() {
			s.content.start(t.name)
		}
	}
	if kind&kindHidden != 0 {
		if !void {
			s.hidden[t.a]++
			s.hiddenN++
		}
		return false, false
	}
	if s.hiddenN > 0 || s.chrome.open() {
		return false, false
	}
	if !void && s.mode != modeAll && (kind&kindContainer != 0 || t.a == 0) {
		if !s.content.open() {
			s.beginContent(t)
		}
		if s.isChrome(t) {
			s.chrome.begin(t.name, false)
			return false, htmlBreak[t.a] || t.a == atom.Table
		}
	}
	return s.inScope(), false
}

// wantsAttrs says whether start needs a tag's attributes (htmlTag's
// class, id and role): only where it may begin chrome or content.
func (s *htmlScope) wantsAttrs(a atom.Atom) bool {
	return s.mode != modeAll && s.hiddenN == 0 && !s.chrome.open() && (a == 0 || htmlKind(a)&kindContainer != 0)
}

// beginContent opens the content region at a <main>, role=main or
// <article> the mode reads.
func (s *htmlScope) beginContent(t *htmlTag) {
	main := t.a == atom.Main || hasToken(t.role, "main")
	article := t.a == atom.Article
	switch {
	case main && s.mode != modeArticle:
		s.content.begin(t.name, true)
		s.counts.mains++
	case article && s.mode != modeMain:
		s.content.begin(t.name, false)
		s.counts.articles++
	}
}

// end takes an end tag and says whether the reader reads it, and whether it
// closed the content region.
func (s *htmlScope) end(name []byte, a atom.Atom) (keep, closed bool) {
	if s.chrome.open() {
		s.chrome.end(name)
		if s.hidden[a] > 0 { // a hidden element inside chrome
			s.hidden[a]--
			s.hiddenN--
		}
		return false, false
	}
	in := s.inScope()
	if s.content.open() {
		closed = s.content.end(name)
	}
	if htmlKind(a)&kindHidden != 0 {
		if s.hidden[a] > 0 {
			s.hidden[a]--
			s.hiddenN--
		}
		return false, false
	}
	return s.hiddenN == 0 && in, closed && s.reading()
}

// reading says whether the mode reads the content region alone.
func (s *htmlScope) reading() bool { return s.mode == modeMain || s.mode == modeArticle }

// inScope says whether text here belongs to the part the mode keeps.
func (s *htmlScope) inScope() bool { return !s.reading() || s.content.open() }

// keepText says whether a text token here is read.
func (s *htmlScope) keepText() bool { return s.hiddenN == 0 && !s.chrome.open() && s.inScope() }

// isChrome says whether an element is chrome here.
func (s *htmlScope) isChrome(t *htmlTag) bool {
	inContent := s.content.open()
	switch t.a {
	case atom.Nav, atom.Form, atom.Button:
		return true
	case atom.Aside, atom.Header, atom.Footer:
		if !inContent {
			return true
		}
	}
	for _, w := range []chromeWhere{chromeIn(t.role, htmlChromeRoles), chromeIn(t.class, htmlChromeTokens), chromeIn(t.id, htmlChromeTokens)} {
		if w == chromeAnywhere || (w == chromeOutsideContent && !inContent) {
			return true
		}
	}
	return false
}
