// Command gen writes the hostile seed corpora of the fuzz targets of
// extract and media (go test's corpus format) from internal/hostile.
// Run from the repository root: go run ./extract/testdata/gen
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"weft/internal/hostile"
)

// seed writes one corpus file of values (each []byte or string).
func seed(dir, name string, values ...any) {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range values {
		switch v := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
		case string:
			fmt.Fprintf(&b, "string(%s)\n", strconv.Quote(v))
		default:
			log.Fatalf("seed %s: %T", name, v)
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(dir, name+"-"+hex.EncodeToString(sum[:4]))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}

func main() {
	ex := func(target string) string { return filepath.Join("extract", "testdata", "fuzz", target) }
	md := func(target string) string { return filepath.Join("media", "testdata", "fuzz", target) }

	// PDF, in process: hostile structure the reader must end on cleanly.
	pdf := ex("FuzzReadPDF")
	seed(pdf, "cyclic-pages", hostile.CyclicPages())
	seed(pdf, "huge-length", hostile.HugeLength())
	seed(pdf, "deep-arrays", hostile.DeepPDF(100_000))
	seed(pdf, "deep-dicts", hostile.DeepDictPDF(100_000))
	seed(pdf, "deep-content", hostile.DeepContentPDF(100_000))
	seed(pdf, "plain", hostile.PDF("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[3 0 R]/Count 1>>",
		"<</Type/Page/Parent 2 0 R/Contents 4 0 R/Resources<</Font<</F1<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>>>>>>>",
		"<</Length 35>>stream\nBT /F1 12 Tf 72 700 Td (Hello) Tj ET\nendstream"))
	// PDF, through the jail: files that take the process down.
	jail := ex("FuzzJailReadPDF")
	seed(jail, "xref-bomb", hostile.XrefBomb())
	seed(jail, "prev-loop", hostile.PrevLoop())

	docx := ex("FuzzReadDOCX")
	seed(docx, "zip-bomb", hostile.ZipBomb(300<<20))
	seed(docx, "nested-zips", hostile.NestedZipDOCX(8))
	seed(docx, "many-entries", hostile.ManyEntriesDOCX(2_000))
	seed(docx, "deep-nesting", hostile.DeepDOCX(100_000))
	seed(docx, "plain", hostile.DOCX(`<w:p><w:r><w:t>Hello</w:t></w:r></w:p>`))

	html := ex("FuzzReadHTML")
	seed(html, "deep-nesting", hostile.DeepHTML(100_000))
	seed(html, "gif-polyglot", hostile.GIFHTMLPolyglot())
	seed(html, "invalid-utf8", append([]byte("<html><p>"), hostile.InvalidUTF8()...))
	seed(html, "utf16-no-bom", hostile.UTF16NoBOM("<html><body><h1>Title</h1><p>text</p></body></html>"))

	mdr := ex("FuzzReadMarkdown")
	for name, data := range hostile.MarkdownCases() {
		seed(mdr, name, data)
	}
	seed(mdr, "invalid-utf8", hostile.InvalidUTF8())

	csv := ex("FuzzReadCSV")
	seed(csv, "unbalanced-quotes", []byte(strings.Repeat("\"a,\"\"b\n", 20_000)))
	seed(csv, "wide-row", []byte(strings.Repeat("x,", 200_000)+"\n1\n"))
	seed(csv, "utf16-no-bom", hostile.UTF16NoBOM("a,b\n1,2\n"))

	text := ex("FuzzReadText")
	seed(text, "invalid-utf8", hostile.InvalidUTF8())
	seed(text, "utf16-no-bom", hostile.UTF16NoBOM("plain words in UTF-16 without a mark\n"))
	seed(text, "nuls", []byte(strings.Repeat("a\x00", 10_000)))

	det := ex("FuzzDetect")
	seed(det, "xref-bomb", "bomb.pdf", hostile.XrefBomb())
	seed(det, "many-entries", "x.docx", hostile.ManyEntriesDOCX(2_000))
	seed(det, "gif-polyglot", "x.html", hostile.GIFHTMLPolyglot())
	seed(det, "utf16-no-bom", "notes.md", hostile.UTF16NoBOM("# Title\n"))
	seed(det, "nested-zips", "a.docx", hostile.NestedZipDOCX(3))

	thumb := ex("FuzzThumbnail")
	seed(thumb, "png-huge-header", hostile.PNGHugeHeader(100_000, 100_000))
	seed(thumb, "jpeg-huge-header", hostile.JPEGHugeHeader())
	seed(thumb, "gif-huge-header", hostile.GIFHugeHeader())
	seed(thumb, "webp-huge-header", hostile.WebPHugeHeader())
	seed(thumb, "gif-polyglot", hostile.GIFHTMLPolyglot())
	seed(thumb, "png-small", hostile.PNG(4, 4, 8, 2, make([]byte, 4*(1+12))))
	jthumb := ex("FuzzJailThumbnail")
	seed(jthumb, "png-bomb", hostile.PNGBomb())

	sn := md("FuzzSniff")
	seed(sn, "png-huge-header", "a.png", hostile.PNGHugeHeader(100_000, 100_000))
	seed(sn, "jpeg-huge-header", "a.jpg", hostile.JPEGHugeHeader())
	seed(sn, "gif-huge-header", "a.gif", hostile.GIFHugeHeader())
	seed(sn, "webp-huge-header", "a.webp", hostile.WebPHugeHeader())
	seed(sn, "gif-polyglot", "a.gif", hostile.GIFHTMLPolyglot())
	seed(sn, "svg-utf16", "a.png", hostile.UTF16NoBOM(`<svg xmlns="http://www.w3.org/2000/svg"/>`))
	seed(sn, "xref-bomb", "a.pdf", hostile.XrefBomb())
}
