package extract

import (
	"bytes"
	"errors"
	"io"

	"github.com/ledongthuc/pdf"
)

// PDF reading uses github.com/ledongthuc/pdf for the file structure (xref
// tables and streams, objects, filters, decryption with an empty password,
// font encodings and ToUnicode maps) and its PostScript-style interpreter,
// but walks the page tree and interprets the text operators itself (see
// read_pdf_text.go). The library's own page walk and text helpers loop
// forever on a cyclic page tree, accumulate unbounded memory on a hostile
// content stream and lose the spaces and line breaks that text positioning
// implies; here every loop is bounded and the layout is rebuilt from the
// glyph positions.

const (
	// pdfMaxContent bounds the decompressed content streams (forms
	// included) interpreted for one page; the library's interpreter keeps
	// every operand on a stack, so a stream of millions of numbers would
	// otherwise cost gigabytes. Pages over it are left out.
	pdfMaxContent = 16 << 20
	// pdfMaxTreeDepth bounds the page tree and the inheritance chain.
	pdfMaxTreeDepth = 64
)

// readPDF reads a PDF as one block per page that has text.
func readPDF(r *reader, data []byte) error {
	start := pdfStart(data)
	if start < 0 {
		return readErr(nil, "This file is not a PDF.")
	}
	data = normalizePDF(data[start:])
	if xrefChainLoops(data) {
		return readErr(nil, "The PDF is damaged: its cross-reference sections point back at each other, so Weft could not open it.")
	}
	doc, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return pdfOpenError(err, data)
	}
	pages, err := pdfPages(doc, r.lim.MaxPages)
	if err != nil {
		return err
	}
	t := &pdfText{r: r, fonts: map[string]*pdfFont{}}
	for i, page := range pages {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		text, err := t.page(page)
		if err != nil {
			return err
		}
		if err := r.emit(Block{Text: text, Page: i + 1}); err != nil {
			return err
		}
	}
	switch {
	case len(r.blocks) > 0:
		return nil
	case t.damaged > 0:
		return readErr(nil, "The PDF is damaged: Weft could not read the text of its pages.")
	case len(pages) == 0:
		return readErr(nil, "The PDF has no pages.")
	}
	return readErr(nil, "The PDF has no text to read: it may be scanned images, and Weft does not recognize text in images.")
}

// pdfMaxSections bounds the /Prev chain of cross-reference sections; an
// incrementally saved PDF has one section per save.
const pdfMaxSections = 4096

// xrefChainLoops follows the /Prev chain of cross-reference sections from
// the last startxref, as the library will, and tells whether it comes back
// to a section already seen (or never ends): the library follows such a
// chain forever, so the file is refused before it is opened. The jail
// would stop it too, but only after its CPU limit. Each section's /Prev
// is the first one after its start, before its startxref (a table's
// trailer) or its stream (an xref stream's dictionary).
func xrefChainLoops(data []byte) bool {
	i := bytes.LastIndex(data, []byte("startxref"))
	if i < 0 {
		return false
	}
	off, ok := pdfOffset(data[i+len("startxref"):])
	seen := map[int64]bool{}
	for ok {
		if off < 0 || off >= int64(len(data)) {
			return false // the library gives its own error
		}
		if seen[off] || len(seen) >= pdfMaxSections {
			return true
		}
		seen[off] = true
		sec := data[off:]
		end := len(sec)
		if j := bytes.Index(sec, []byte("startxref")); j >= 0 {
			end = j
		}
		if !bytes.HasPrefix(bytes.TrimLeft(sec, " \t\r\n\f\x00"), []byte("xref")) {
			if j := bytes.Index(sec[:end], []byte("stream")); j >= 0 {
				end = j
			}
		}
		p := bytes.Index(sec[:end], []byte("/Prev"))
		if p < 0 {
			return false
		}
		off, ok = pdfOffset(sec[p+len("/Prev") : end])
	}
	return false
}

// pdfOffset reads the integer after optional white space.
func pdfOffset(b []byte) (int64, bool) {
	b = bytes.TrimLeft(b, " \t\r\n\f\x00")
	var n int64
	digits := 0
	for _, c := range b {
		if c < '0' || c > '9' || digits > 18 {
			break
		}
		n = n*10 + int64(c-'0')
		digits++
	}
	return n, digits > 0
}

// normalizePDF works around two strictnesses of the library: it accepts
// only "%PDF-1.0" to "%PDF-1.7" followed by a line end (a PDF 2.0 file, or
// one with a comment on its first line, would be refused), and it wants
// %%EOF at the very end (junk after it is common). The header is only a
// comment for the parser, so rewriting it in a copy is harmless.
func normalizePDF(data []byte) []byte {
	if i := bytes.LastIndex(data, []byte("%%EOF")); i >= 0 && len(bytes.TrimSpace(data[i+5:])) > 0 {
		data = data[:i+5]
	}
	ok := len(data) > 8 && bytes.HasPrefix(data, []byte("%PDF-1.")) &&
		data[7] >= '0' && data[7] <= '7' && (data[8] == '\n' || data[8] == '\r')
	if ok || len(data) <= 8 {
		return data
	}
	fixed := bytes.Clone(data)
	copy(fixed, "%PDF-1.7")
	if fixed[8] != '\n' && fixed[8] != '\r' {
		fixed[8] = '\n'
	}
	return fixed
}

// pdfOpenError words the library's refusal to open a PDF. The library's
// errors are untyped but for the password, so an encrypted file is told
// by its content (an /Encrypt entry), never by the error's text.
func pdfOpenError(err error, data []byte) error {
	switch {
	case errors.Is(err, pdf.ErrInvalidPassword):
		return readErr(err, "This PDF is protected by a password. Remove the protection and upload it again.")
	case bytes.Contains(data, []byte("/Encrypt")):
		return readErr(err, "This PDF is encrypted in a way Weft cannot read. Remove the protection and upload it again.")
	}
	return readErr(err, "The PDF is damaged or not a valid PDF file, so Weft could not open it.")
}

// pdfPages walks the page tree iteratively, bounding its depth, the nodes
// visited and the pages found, so that cycles and absurd trees end.
func pdfPages(doc *pdf.Reader, maxPages int) ([]pdf.Value, error) {
	root := doc.Trailer().Key("Root").Key("Pages")
	if root.IsNull() {
		return nil, readErr(nil, "The PDF is damaged: it has no page tree.")
	}
	tooMany := readErr(ErrTooLarge, "The PDF has more than %s pages; split it into smaller files.", thousands(maxPages))
	if int(root.Key("Count").Int64()) > maxPages {
		return nil, tooMany
	}
	type node struct {
		v     pdf.Value
		depth int
	}
	budget := 4*maxPages + 1024 // nodes: pages plus the inner nodes above them
	var pages []pdf.Value
	stack := []node{{root, 0}}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if budget--; budget < 0 {
			return nil, readErr(nil, "The PDF is damaged: its page tree does not end.")
		}
		kids := n.v.Key("Kids")
		typ := n.v.Key("Type").Name()
		if typ == "Pages" || (typ == "" && kids.Kind() == pdf.Array) {
			if n.depth >= pdfMaxTreeDepth || kids.Len() > budget {
				return nil, readErr(nil, "The PDF is damaged: its page tree does not end.")
			}
			for i := kids.Len() - 1; i >= 0; i-- {
				stack = append(stack, node{kids.Index(i), n.depth + 1})
			}
			continue
		}
		if typ != "Page" && n.v.Key("Contents").IsNull() {
			continue // not a page
		}
		if pages = append(pages, n.v); len(pages) > maxPages {
			return nil, tooMany
		}
	}
	return pages, nil
}

// inherited looks key up on a page and then its ancestors, a bounded
// number of them (the library's own lookup loops on a cyclic Parent).
func inherited(v pdf.Value, key string) pdf.Value {
	for i := 0; i < pdfMaxTreeDepth && !v.IsNull(); i++ {
		if x := v.Key(key); !x.IsNull() {
			return x
		}
		v = v.Key("Parent")
	}
	return pdf.Value{}
}

// streamSize is the decompressed size of a stream, or of an array of
// streams, counting at most limit+1 bytes; a stream that fails to decode
// counts as over the limit.
func streamSize(v pdf.Value, limit int64) (n int64) {
	defer func() {
		if recover() != nil { // unknown filter
			n = limit + 1
		}
	}()
	if v.Kind() == pdf.Array {
		for i := 0; i < v.Len() && n <= limit; i++ {
			n += streamSize(v.Index(i), limit-n)
		}
		return n
	}
	rc := v.Reader()
	defer rc.Close()
	n, err := io.Copy(io.Discard, io.LimitReader(rc, limit+1))
	if err != nil {
		return limit + 1
	}
	return n
}
