package extract

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"path"
	"strconv"
	"strings"

	"golang.org/x/net/html/charset"
)

// readDOCX reads a Word document: word/document.xml (or the main part that
// _rels/.rels names) is streamed through encoding/xml, with the heading
// levels of its paragraph styles taken from word/styles.xml. Everything
// decompressed counts against Limits.MaxUnzipped, whatever the ZIP headers
// claim, so that a zip bomb is stopped after that many bytes.
func readDOCX(r *reader, data []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return readErr(err, "The DOCX file is damaged: it is not a readable ZIP archive.")
	}
	main := docxMain(zr)
	if main == nil {
		return readErr(nil, "This file is a ZIP archive but not a Word document.")
	}
	b := &unzipBudget{left: r.lim.MaxUnzipped, max: r.lim.MaxUnzipped}
	d := &docxReader{r: r, styles: map[string]int{}}
	if f := zipFile(zr, "word/styles.xml"); f != nil {
		if err := b.stream(f, d.readStyles); err != nil {
			return err
		}
	}
	return b.stream(main, d.readDocument)
}

// docxMain finds the main document part of a Word file, or nil.
func docxMain(zr *zip.Reader) *zip.File {
	if rels := zipFile(zr, "_rels/.rels"); rels != nil && rels.UncompressedSize64 < 1<<20 {
		if rc, err := rels.Open(); err == nil {
			var doc struct {
				Rels []struct {
					Type   string `xml:"Type,attr"`
					Target string `xml:"Target,attr"`
				} `xml:"Relationship"`
			}
			err := xml.NewDecoder(io.LimitReader(rc, 1<<20)).Decode(&doc)
			rc.Close()
			for _, rel := range doc.Rels {
				target := path.Clean(strings.TrimPrefix(rel.Target, "/"))
				if err == nil && strings.HasSuffix(rel.Type, "/officeDocument") && strings.HasPrefix(strings.ToLower(target), "word/") {
					if f := zipFile(zr, target); f != nil {
						return f
					}
				}
			}
		}
	}
	return zipFile(zr, "word/document.xml")
}

func zipFile(zr *zip.Reader, name string) *zip.File {
	for _, f := range zr.File {
		if strings.EqualFold(f.Name, name) {
			return f
		}
	}
	return nil
}

// unzipBudget is what may still be decompressed from one archive.
type unzipBudget struct{ left, max int64 }

var errUnzipLimit = errors.New("decompressed size over the limit")

func (b *unzipBudget) read(rd io.Reader, p []byte) (int, error) {
	if b.left < 0 {
		return 0, errUnzipLimit
	}
	n, err := rd.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return n, errUnzipLimit
	}
	return n, err
}

// stream decompresses f into parse, turning failures into ReadErrors.
func (b *unzipBudget) stream(f *zip.File, parse func(io.Reader) error) error {
	rc, err := f.Open()
	if err != nil {
		return readErr(err, "The DOCX file is damaged or uses a compression Weft cannot read.")
	}
	defer rc.Close()
	err = parse(budgetReader{b, rc})
	var re *ReadError
	switch {
	case err == nil, errors.As(err, &re), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, errUnzipLimit):
		return readErr(errors.Join(ErrTooLarge, err), "The DOCX file expands to more than %s when unpacked; it may be damaged or a zip bomb.", byteSize(b.max))
	}
	return readErr(err, "The DOCX file is damaged: its text cannot be read.")
}

type budgetReader struct {
	b  *unzipBudget
	rd io.Reader
}

func (br budgetReader) Read(p []byte) (int, error) { return br.b.read(br.rd, p) }

// docxReader turns the WordprocessingML token stream into blocks. Elements
// are matched by local name, so both the transitional and the strict
// namespaces work.
type docxReader struct {
	r      *reader
	styles map[string]int // paragraph style ID → heading level (0: title)
	path   headingPath

	skip  int // depth inside mc:Fallback, which repeats mc:Choice
	run   int // depth inside w:r: w:tab and w:br count only there
	inT   bool
	p     int // paragraph depth (text boxes nest paragraphs)
	para  strings.Builder
	level int // heading level of the paragraph, -1 for body text
	list  bool

	tbl  int // table depth
	rows [][]string
}

// readStyles maps the paragraph styles that are headings to their level:
// by name ("heading 1" … "heading 9", "title") or by outline level.
func (d *docxReader) readStyles(rd io.Reader) error {
	dec := xml.NewDecoder(rd)
	dec.CharsetReader = charset.NewReaderLabel // Word writes UTF-8, other tools may not
	var id, name string
	outline := -1
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "style":
				id, name, outline = attr(t, "styleId"), "", -1
			case "name":
				name = strings.ToLower(attr(t, "val"))
			case "outlineLvl":
				if n, err := strconv.Atoi(attr(t, "val")); err == nil && n >= 0 && n < 9 {
					outline = n
				}
			}
		case xml.EndElement:
			if t.Name.Local != "style" || id == "" {
				continue
			}
			n, err := strconv.Atoi(strings.TrimPrefix(name, "heading "))
			switch {
			case name == "title":
				d.styles[id] = 0
			case strings.HasPrefix(name, "heading ") && err == nil && n >= 1 && n <= 9:
				d.styles[id] = n
			case outline >= 0:
				d.styles[id] = outline + 1
			}
			id = ""
		}
	}
}

// styleLevel is the heading level of a paragraph style, -1 for body text.
// Without styles.xml the built-in IDs (Title, Heading1 …) still count.
func (d *docxReader) styleLevel(id string) int {
	if n, ok := d.styles[id]; ok {
		return n
	}
	lower := strings.ToLower(id)
	if lower == "title" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(lower, "heading")); err == nil && strings.HasPrefix(lower, "heading") && n >= 1 && n <= 9 {
		return n
	}
	return -1
}

func (d *docxReader) readDocument(rd io.Reader) error {
	dec := xml.NewDecoder(rd)
	dec.CharsetReader = charset.NewReaderLabel // Word writes UTF-8, other tools may not
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := d.r.ctx.Err(); err != nil {
				return err
			}
		}
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if d.skip > 0 || t.Name.Local == "Fallback" {
				d.skip++
				continue
			}
			d.start(t)
		case xml.EndElement:
			if d.skip > 0 {
				d.skip--
				continue
			}
			if err := d.end(t.Name.Local); err != nil {
				return err
			}
		case xml.CharData:
			if d.inT && d.skip == 0 {
				d.para.Write(t)
			}
		}
	}
}

func (d *docxReader) start(t xml.StartElement) {
	switch t.Name.Local {
	case "p":
		d.p++
		if d.p == 1 {
			d.level, d.list = -1, false
		} else {
			d.para.WriteByte('\n')
		}
	case "pStyle":
		if d.p == 1 {
			d.level = d.styleLevel(attr(t, "val"))
		}
	case "outlineLvl":
		if n, err := strconv.Atoi(attr(t, "val")); err == nil && d.p == 1 && n >= 0 && n < 9 {
			d.level = n + 1
		}
	case "numPr":
		d.list = d.p == 1
	case "r":
		d.run++
	case "t":
		d.inT = true
	case "tab":
		if d.run > 0 {
			d.para.WriteByte('\t')
		}
	case "br", "cr":
		if d.run > 0 {
			d.para.WriteByte('\n')
		}
	case "noBreakHyphen":
		if d.run > 0 {
			d.para.WriteByte('-')
		}
	case "tbl":
		d.tbl++
		if d.tbl == 1 {
			d.rows = nil
		}
	case "tr":
		if d.tbl == 1 {
			d.rows = append(d.rows, nil)
		}
	case "tc":
		if d.tbl == 1 {
			if len(d.rows) == 0 {
				d.rows = append(d.rows, nil)
			}
			d.rows[len(d.rows)-1] = append(d.rows[len(d.rows)-1], "")
		}
	}
}

func (d *docxReader) end(local string) error {
	switch local {
	case "t":
		d.inT = false
	case "r":
		d.run = max(d.run-1, 0)
	case "p":
		d.p = max(d.p-1, 0)
		if d.p > 0 {
			return nil
		}
		text := d.para.String()
		d.para.Reset()
		switch {
		case d.tbl > 0: // a cell's paragraphs join into the cell
			if row := len(d.rows) - 1; row >= 0 && len(d.rows[row]) > 0 {
				cell := &d.rows[row][len(d.rows[row])-1]
				*cell = strings.TrimSpace(*cell + " " + text)
			}
		case d.level >= 0:
			d.path.set(d.level, text)
		case d.list:
			return d.r.emit(Block{Text: "- " + text, Headings: d.path.path()})
		default:
			return d.r.emit(Block{Text: text, Headings: d.path.path()})
		}
	case "tbl":
		d.tbl = max(d.tbl-1, 0)
		if d.tbl == 0 {
			rows := d.rows
			d.rows = nil
			return d.r.emit(Block{Text: tableText(rows), Headings: d.path.path(), Table: true})
		}
	}
	return nil
}

// attr is the value of the attribute with the given local name.
func attr(t xml.StartElement, local string) string {
	for _, a := range t.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// byteSize formats n bytes as "200 MB" or "512 KB".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
