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

// htmlHidden are elements whose text is never content: code, styling,
// embedded images and formulas, form controls' options, the <title>.
var htmlHidden = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Title: true, atom.Svg: true, atom.Math: true, atom.Iframe: true, atom.Object: true,
	atom.Textarea: true, atom.Select: true, atom.Noembed: true, atom.Noframes: true,
}

// htmlVoid are elements that never have an end tag, so never open a
// region.
var htmlVoid = map[atom.Atom]bool{
	atom.Area: true, atom.Base: true, atom.Br: true, atom.Col: true, atom.Embed: true, atom.Hr: true,
	atom.Img: true, atom.Input: true, atom.Link: true, atom.Meta: true, atom.Param: true,
	atom.Source: true, atom.Track: true, atom.Wbr: true, atom.Keygen: true,
}

// htmlImpliedEnd are elements whose end tag may be left out: followed by
// counting, one left open would hide the rest of the page, so their
// attributes never make them chrome (the chrome of real pages is made of
// divs, lists, links and sectioning elements).
var htmlImpliedEnd = map[atom.Atom]bool{
	atom.P: true, atom.Li: true, atom.Dt: true, atom.Dd: true, atom.Tr: true, atom.Td: true,
	atom.Th: true, atom.Thead: true, atom.Tbody: true, atom.Tfoot: true, atom.Option: true,
	atom.Optgroup: true, atom.Rt: true, atom.Rp: true, atom.Colgroup: true, atom.Caption: true,
	atom.Html: true, atom.Head: true, atom.Body: true,
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
	void := t.selfClosing || htmlVoid[t.a]
	if !void {
		if s.chrome.open() {
			s.chrome.start(t.name)
		}
		if s.content.open() {
			s.content.start(t.name)
		}
	}
	if htmlHidden[t.a] {
		if !void {
			s.hidden[t.a]++
			s.hiddenN++
		}
		return false, false
	}
	if s.hiddenN > 0 || s.chrome.open() {
		return false, false
	}
	if !void && s.mode != modeAll {
		if !s.content.open() {
			s.beginContent(t)
		}
		if !htmlImpliedEnd[t.a] && s.isChrome(t) {
			s.chrome.begin(t.name, false)
			return false, htmlBreak[t.a] || t.a == atom.Table || htmlHeading[t.a] > 0
		}
	}
	return s.inScope(), false
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
		if htmlHidden[a] && s.hidden[a] > 0 { // a hidden element inside chrome
			s.hidden[a]--
			s.hiddenN--
		}
		return false, false
	}
	in := s.inScope()
	if s.content.open() {
		closed = s.content.end(name)
	}
	if htmlHidden[a] {
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
