package extract

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
)

// htmlSkip are the elements whose text the Markdown reader leaves out of
// inline HTML: the HTML reader's hidden elements (htmlKind) and <nav>.
var htmlSkip = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Nav: true, atom.Noscript: true, atom.Template: true,
	atom.Title: true, atom.Svg: true, atom.Math: true, atom.Iframe: true, atom.Object: true,
	atom.Textarea: true, atom.Select: true, atom.Noembed: true, atom.Noframes: true,
}

// htmlBreak are elements that end a paragraph where they start and end.
var htmlBreak = map[atom.Atom]bool{
	atom.Address: true, atom.Article: true, atom.Aside: true, atom.Blockquote: true, atom.Body: true,
	atom.Dd: true, atom.Details: true, atom.Dialog: true, atom.Div: true, atom.Dl: true, atom.Dt: true,
	atom.Fieldset: true, atom.Figcaption: true, atom.Figure: true, atom.Footer: true, atom.Form: true,
	atom.Header: true, atom.Hgroup: true, atom.Hr: true, atom.Li: true, atom.Main: true, atom.Ol: true,
	atom.P: true, atom.Pre: true, atom.Section: true, atom.Summary: true, atom.Ul: true, atom.Legend: true,
	atom.Caption: true, atom.Html: true, atom.Head: true,
}

// maxHeadingBytes is where an unclosed heading is taken for body text.
const maxHeadingBytes = 1000

var htmlHeading = map[atom.Atom]int{atom.H1: 1, atom.H2: 2, atom.H3: 3, atom.H4: 4, atom.H5: 5, atom.H6: 6}

// readHTML reads an HTML page with the streaming tokenizer, which keeps no
// tree: arbitrarily deep nesting costs nothing and unclosed elements are
// harmless, since every block-level tag simply ends the current paragraph.
// A first pass measures where the page's text is (htmlCounts), to choose
// what the second keeps (htmlMode): see read_html_scope.go.
func readHTML(r *reader, data []byte) error {
	src := decodeHTML(data)
	first := newHTMLScope(modeBody)
	if err := walkHTML(r, src, first, nil); err != nil {
		return err
	}
	h := &htmlReader{r: r}
	return walkHTML(r, src, newHTMLScope(first.counts.mode()), h)
}

// walkHTML runs the tokenizer over src, telling s every token and h what s
// keeps; with h nil (the first pass) s only counts.
func walkHTML(r *reader, src string, s *htmlScope, h *htmlReader) error {
	z := html.NewTokenizer(strings.NewReader(src))
	var t htmlTag
	var name []byte
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := r.ctx.Err(); err != nil {
				return err
			}
		}
		tt := z.Next()
		var err error
		switch tt {
		case html.ErrorToken: // io.EOF: the tokenizer reads from memory
			if h == nil {
				return nil
			}
			return h.finish()
		case html.TextToken:
			switch {
			case h == nil: // entities count as their source: near enough
				s.countText(z.Raw())
			case s.keepText():
				err = h.text(string(z.Text()))
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name = rawTagName(z.Raw(), name)
			readTag(z, &t, name, tt == html.SelfClosingTagToken, s)
			keep, brk := s.start(&t)
			switch {
			case h == nil:
			case keep:
				err = h.start(t.a, t.selfClosing)
			case brk:
				err = h.brk()
			}
		case html.EndTagToken:
			name = rawTagName(z.Raw(), name)
			a := atom.Lookup(name)
			keep, closed := s.end(name, a)
			if h != nil && keep {
				err = h.end(a)
			}
			if h != nil && closed && err == nil {
				err = h.closeContent()
			}
		}
		if err != nil {
			return err
		}
	}
}

// rawTagName is the lower-case name of a tag token, read from its source as
// the tokenizer reads it, into buf: TagName would copy it, for every tag of
// both passes.
func rawTagName(raw, buf []byte) []byte {
	buf = buf[:0]
	i := 1 // "<"
	if i < len(raw) && raw[i] == '/' {
		i++
	}
	for ; i < len(raw); i++ {
		c := raw[i]
		switch c {
		case ' ', '\n', '\r', '\t', '\f', '/', '>':
			return buf
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	return buf
}

// readTag reads a start tag and, if s wants them, the attributes s looks
// at.
func readTag(z *html.Tokenizer, t *htmlTag, name []byte, selfClosing bool, s *htmlScope) {
	*t = htmlTag{name: name, a: atom.Lookup(name), selfClosing: selfClosing}
	for more := s.wantsAttrs(t.a); more; {
		var key, val []byte
		key, val, more = z.TagAttr()
		switch {
		case string(key) == "class" && t.class == nil:
			t.class = val
		case string(key) == "id" && t.id == nil:
			t.id = val
		case string(key) == "role" && t.role == nil:
			t.role = val
		}
	}
}

// decodeHTML decodes a page: UTF-8 (even with a few broken bytes) or UTF-16
// as found, otherwise the charset its <meta> declares in the first 1 KB,
// otherwise Windows-1252.
func decodeHTML(data []byte) string {
	if utf8.Valid(data) || mostlyUTF8(data) || utf16Order(data) != 0 || bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return decodeText(data)
	}
	enc, _, _ := charset.DetermineEncoding(data, "")
	if out, err := enc.NewDecoder().Bytes(data); err == nil {
		return strings.ToValidUTF8(string(out), "\uFFFD")
	}
	return decodeText(data)
}

type htmlReader struct {
	r       *reader
	path    headingPath
	para    strings.Builder
	pre     int // open <pre> elements
	heading int // level of the open heading, 0 if none
	head    strings.Builder
	table   int // depth of open tables
	rows    [][]string
	cell    *strings.Builder // nil between cells
	caption strings.Builder  // of the open table, read as a paragraph
	inCap   bool
}

func (h *htmlReader) start(a atom.Atom, selfClosing bool) error {
	if h.table > 0 {
		return h.startInTable(a)
	}
	switch {
	case a == atom.Table:
		if err := h.flush(); err != nil {
			return err
		}
		h.table, h.rows = 1, nil
	case htmlHeading[a] > 0:
		if err := h.flush(); err != nil {
			return err
		}
		h.heading = htmlHeading[a]
		h.head.Reset()
	case a == atom.Br:
		h.write("\n")
	case h.heading > 0 && htmlBreak[a]: // <h2><div>Title</div></h2>
		h.write(" ")
	case htmlBreak[a]:
		err := h.flush()
		if a == atom.Pre {
			h.pre++
		}
		return err
	}
	return nil
}

func (h *htmlReader) startInTable(a atom.Atom) error {
	switch {
	case a == atom.Table:
		h.table++
	case h.table > 1: // a nested table is flattened into the outer cell
		h.write(" ")
	case a == atom.Caption:
		h.inCap = true
	case a == atom.Tr:
		h.cell = nil
		h.rows = append(h.rows, nil)
	case a == atom.Td || a == atom.Th:
		h.newCell()
	case a == atom.Br || htmlBreak[a] || htmlHeading[a] > 0:
		h.write(" ")
	}
	return nil
}

func (h *htmlReader) newCell() {
	if len(h.rows) == 0 {
		h.rows = append(h.rows, nil)
	}
	h.cell = new(strings.Builder)
	last := len(h.rows) - 1
	h.rows[last] = append(h.rows[last], "")
}

func (h *htmlReader) end(a atom.Atom) error {
	switch {
	case h.table > 0:
		switch {
		case a == atom.Table:
			h.table--
			if h.table == 0 {
				return h.endTable()
			}
		case h.table == 1 && (a == atom.Td || a == atom.Th || a == atom.Tr):
			h.cell = nil
		case a == atom.Caption:
			h.inCap = false
		}
	case htmlHeading[a] > 0 && h.heading > 0:
		h.path.set(h.heading, h.head.String())
		h.heading = 0
	case h.heading > 0 && htmlBreak[a]:
	case htmlBreak[a]:
		err := h.flush()
		if a == atom.Pre && h.pre > 0 {
			h.pre--
		}
		return err
	}
	return nil
}

func (h *htmlReader) text(s string) error {
	if h.pre == 0 || h.table > 0 || h.heading > 0 {
		s = collapseSpace(s)
	}
	h.write(s)
	return nil
}

// write appends text to whatever is open: a table cell, a heading or the
// paragraph.
func (h *htmlReader) write(s string) {
	switch {
	case h.inCap:
		h.caption.WriteString(s)
	case h.table > 0:
		if h.cell == nil {
			if strings.TrimSpace(s) == "" {
				return
			}
			h.newCell()
		}
		h.cell.WriteString(s)
		last := len(h.rows) - 1
		row := h.rows[last]
		row[len(row)-1] = h.cell.String()
	case h.heading > 0:
		h.head.WriteString(s)
		if h.head.Len() > maxHeadingBytes { // a heading never closed: it was text
			h.para.WriteString(h.head.String())
			h.head.Reset()
			h.heading = 0
		}
	default:
		h.para.WriteString(s)
	}
}

func (h *htmlReader) flush() error {
	if h.heading > 0 { // a heading left open ends at the next block
		h.path.set(h.heading, h.head.String())
		h.heading = 0
	}
	text := h.para.String()
	h.para.Reset()
	if h.pre == 0 {
		lines := strings.Split(text, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimSpace(l)
		}
		text = strings.Join(lines, "\n")
	}
	return h.r.emit(Block{Text: text, Headings: h.path.path()})
}

// brk ends the paragraph where a block was left out.
func (h *htmlReader) brk() error {
	if h.table > 0 || h.heading > 0 {
		h.write(" ")
		return nil
	}
	return h.flush()
}

// closeContent ends everything still open where the part read alone ends,
// so that nothing of it runs on into the next such part.
func (h *htmlReader) closeContent() error {
	err := h.flush()
	if err == nil && h.table > 0 {
		err = h.endTable()
	}
	h.pre = 0
	return err
}

// finish ends the page.
func (h *htmlReader) finish() error {
	if err := h.flush(); err != nil {
		return err
	}
	return h.endTable()
}

func (h *htmlReader) endTable() error {
	rows, caption := h.rows, h.caption.String()
	h.rows, h.cell, h.table, h.inCap = nil, nil, 0, false
	h.caption.Reset()
	if err := h.r.emit(Block{Text: caption, Headings: h.path.path()}); err != nil {
		return err
	}
	return h.r.emit(Block{Text: tableText(rows), Headings: h.path.path(), Table: true})
}

// collapseSpace turns every run of HTML whitespace into one space.
func collapseSpace(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, c := range s {
		if c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(c)
	}
	if space {
		b.WriteByte(' ')
	}
	return b.String()
}
