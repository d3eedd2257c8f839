// Package hostile builds hostile files for the readers' tests and fuzz
// seed corpora: each is small and aimed at one way a parser can be made
// to allocate without bound, loop, recurse or crash. Nothing here is
// downloaded; testdata/gen writes them as seeds.
//
// It also builds the benign files the same tests read (images, ZIPs,
// PDFs of pages; benign.go): one builder of each kind for every package's
// tests, beside the hostile variants they are compared with. It is
// imported by tests and generators only, never by the server.
package hostile

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
)

// XrefBomb is a PDF of about 130 bytes whose cross-reference table starts
// at object number 2^34-1: a reader that sizes its table by the highest
// object number allocates half a terabyte.
func XrefBomb() []byte {
	head := "%PDF-1.4\n"
	xref := "xref\n17179869183 1\n0000000009 00000 n \ntrailer\n<</Size 17179869184/Root 1 0 R>>\n"
	return fmt.Appendf(nil, "%s%sstartxref\n%d\n%%%%EOF\n", head, xref, len(head))
}

// PrevLoop is a PDF whose trailer's /Prev points at its own xref table,
// so a reader that follows the chain never ends.
func PrevLoop() []byte {
	head := "%PDF-1.4\n1 0 obj <</Type/Catalog/Pages 2 0 R>> endobj\n2 0 obj <</Type/Pages/Kids[]/Count 0>> endobj\n"
	off := len(head)
	xref := fmt.Sprintf("xref\n0 3\n0000000000 65535 f \n%010d 00000 n \n%010d 00000 n \ntrailer\n<</Size 3/Root 1 0 R/Prev %d>>\n",
		9, 9+strings.Index(head[9:], "2 0 obj"), off)
	return fmt.Appendf(nil, "%s%sstartxref\n%d\n%%%%EOF\n", head, xref, off)
}

// PDF builds a PDF from objects numbered from 1 (object 1 must be the
// catalog) with a correct xref table.
func PDF(objs ...string) []byte { return PDFWithTrailer("", objs...) }

// PDFWithTrailer is PDF with more entries in the trailer dictionary.
func PDFWithTrailer(trailer string, objs ...string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	start := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	if trailer != "" {
		trailer = " " + trailer
	}
	fmt.Fprintf(&b, "trailer\n<</Size %d/Root 1 0 R%s>>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, trailer, start)
	return b.Bytes()
}

// CyclicPages is a PDF whose page tree contains itself.
func CyclicPages() []byte {
	return PDF("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[2 0 R 3 0 R]/Count 2>>",
		"<</Type/Page/Parent 2 0 R/Contents 4 0 R>>", "<</Length 0>>stream\n\nendstream")
}

// HugeLength is a PDF whose content stream claims a length of 2^62 bytes.
func HugeLength() []byte {
	return PDF("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[3 0 R]/Count 1>>",
		"<</Type/Page/Parent 2 0 R/Contents 4 0 R>>", "<</Length 4611686018427387904>>stream\nBT ET\nendstream")
}

// DeepPDF is a PDF whose page dictionary holds arrays nested depth deep.
func DeepPDF(depth int) []byte {
	return PDF("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[3 0 R]/Count 1>>",
		"<</Type/Page/Parent 2 0 R/X "+strings.Repeat("[", depth)+strings.Repeat("]", depth)+">>")
}

// DeepDictPDF is a PDF with dictionaries nested depth deep.
func DeepDictPDF(depth int) []byte {
	return PDF("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[3 0 R]/Count 1>>",
		"<</Type/Page/Parent 2 0 R/X "+strings.Repeat("<</A ", depth)+strings.Repeat(">>", depth)+">>")
}

// DeepContentPDF is a page whose content stream nests arrays depth deep.
func DeepContentPDF(depth int) []byte {
	content := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	return PDF("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[3 0 R]/Count 1>>",
		"<</Type/Page/Parent 2 0 R/Contents 4 0 R>>",
		fmt.Sprintf("<</Length %d>>stream\n%s\nendstream", len(content), content))
}

// Zip builds a ZIP archive from name, content pairs, deflated.
func Zip(files ...string) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i := 0; i+1 < len(files); i += 2 {
		w, err := zw.Create(files[i])
		if err != nil {
			panic(err)
		}
		w.Write([]byte(files[i+1]))
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}

const docxRels = `<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="r1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`

// DOCX is a Word document with the given body XML.
func DOCX(body string, extra ...string) []byte {
	return Zip(append([]string{"_rels/.rels", docxRels,
		"word/document.xml", `<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` + body + `</w:body></w:document>`}, extra...)...)
}

// ZipBomb is a DOCX whose document.xml inflates to unpacked bytes of
// text inside one paragraph.
func ZipBomb(unpacked int) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.Create("_rels/.rels")
	w.Write([]byte(docxRels))
	w, _ = zw.Create("word/document.xml")
	w.Write([]byte(`<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>`))
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	for n := 0; n < unpacked; n += len(chunk) {
		w.Write(chunk[:min(len(chunk), unpacked-n)])
	}
	w.Write([]byte(`</w:t></w:r></w:p></w:body></w:document>`))
	zw.Close()
	return b.Bytes()
}

// NestedZipDOCX is a DOCX whose document.xml is itself a ZIP of a DOCX,
// depth levels down.
func NestedZipDOCX(depth int) []byte {
	inner := DOCX(`<w:p><w:r><w:t>inside</w:t></w:r></w:p>`)
	for range depth {
		inner = Zip("_rels/.rels", docxRels, "word/document.xml", string(inner))
	}
	return inner
}

// ManyEntriesDOCX is a DOCX with n tiny extra entries.
func ManyEntriesDOCX(n int) []byte {
	files := make([]string, 0, 2*n)
	for i := range n {
		files = append(files, fmt.Sprintf("%x", i), "")
	}
	return DOCX(`<w:p><w:r><w:t>many</w:t></w:r></w:p>`, files...)
}

// DeepDOCX is a DOCX whose body nests elements depth deep.
func DeepDOCX(depth int) []byte {
	return DOCX(strings.Repeat("<w:p>", depth) + strings.Repeat("</w:p>", depth))
}

func pngChunk(b *bytes.Buffer, typ string, data []byte) {
	binary.Write(b, binary.BigEndian, uint32(len(data)))
	c := append([]byte(typ), data...)
	b.Write(c)
	binary.Write(b, binary.BigEndian, crc32.ChecksumIEEE(c))
}

// PNG builds a PNG of w × h at the given bit depth and color type, its
// IDAT the zlib stream of idat raw bytes (nil: no IDAT, a header only).
func PNG(w, h uint32, depth, colorType byte, idat []byte) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	hdr := binary.BigEndian.AppendUint32(nil, w)
	hdr = binary.BigEndian.AppendUint32(hdr, h)
	hdr = append(hdr, depth, colorType, 0, 0, 0)
	pngChunk(&b, "IHDR", hdr)
	if idat != nil {
		var z bytes.Buffer
		zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
		zw.Write(idat)
		zw.Close()
		pngChunk(&b, "IDAT", z.Bytes())
	}
	pngChunk(&b, "IEND", nil)
	return b.Bytes()
}

// PNGBomb is a small PNG within Weft's pixel cap (7000 × 7000, 16-bit
// RGBA: 392 MB decoded) whose IDAT is zeros that compress a
// thousandfold: a few hundred KB that cost hundreds of MB to decode.
func PNGBomb() []byte {
	const w, h = 7000, 7000
	row := 1 + w*8
	return PNG(w, h, 16, 6, make([]byte, row*h))
}

// PNGHugeHeader is a PNG header declaring w × h pixels and no data.
func PNGHugeHeader(w, h uint32) []byte { return PNG(w, h, 8, 2, nil) }

// JPEGHugeHeader is a JPEG's SOI and a baseline frame header declaring
// 65535 × 65535 pixels, then nothing.
func JPEGHugeHeader() []byte {
	return []byte("\xff\xd8" +
		"\xff\xdb\x00\x43\x00" + strings.Repeat("\x01", 64) +
		"\xff\xc0\x00\x0b\x08\xff\xff\xff\xff\x01\x01\x11\x00" +
		"\xff\xd9")
}

// GIFHugeHeader is a GIF whose logical screen and image are 65535 × 65535.
func GIFHugeHeader() []byte {
	return []byte("GIF89a\xff\xff\xff\xff\x00\x00\x00" +
		",\x00\x00\x00\x00\xff\xff\xff\xff\x00\x02\x02\x44\x01\x00;")
}

// WebPHugeHeader is a lossless WebP header declaring 16384 × 16384.
func WebPHugeHeader() []byte {
	// VP8L: signature 0x2f, then 14 bits width-1, 14 bits height-1.
	v := uint32(16383) | uint32(16383)<<14
	body := append([]byte{0x2f}, binary.LittleEndian.AppendUint32(nil, v)...)
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(4+8+len(body)))
	b.WriteString("WEBPVP8L")
	binary.Write(&b, binary.LittleEndian, uint32(len(body)))
	b.Write(body)
	return b.Bytes()
}

// GIFHTMLPolyglot is a valid tiny GIF that is also an HTML page with a
// script, the classic way past a sniffer that looks only at the start.
func GIFHTMLPolyglot() []byte {
	return []byte("GIF89a/*\x01\x00\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02\x44\x01\x00;*/=1;<html><script>alert(1)</script></html>")
}

// DeepHTML is an HTML page with elements nested depth deep.
func DeepHTML(depth int) []byte {
	return []byte("<!doctype html><html><body>" + strings.Repeat("<div>", depth) + "x" + strings.Repeat("</div>", depth) + "</body></html>")
}

// Markdown cases known to be slow in naive parsers.
func MarkdownCases() map[string][]byte {
	return map[string][]byte{
		"nested-quotes":   []byte(strings.Repeat("> ", 50_000) + "x\n"),
		"nested-lists":    []byte(nestedList(1_000)),
		"unclosed-links":  []byte(strings.Repeat("[a](", 50_000)),
		"unclosed-emph":   []byte(strings.Repeat("*a **b _c ", 30_000)),
		"backticks":       []byte(strings.Repeat("`a``b```c", 20_000)),
		"brackets":        []byte(strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)),
		"long-table":      []byte("|a|b|\n|-|-|\n" + strings.Repeat("|x|y|\n", 50_000)),
		"html-block-open": []byte(strings.Repeat("<div>\n", 50_000)),
	}
}

func nestedList(depth int) string {
	var b strings.Builder
	for i := range depth {
		b.WriteString(strings.Repeat(" ", 2*i) + "- x\n")
	}
	return b.String()
}

// InvalidUTF8 is text with bytes that are no UTF-8.
func InvalidUTF8() []byte { return []byte("caf\xe9 \xff\xfe\xc3\x28 \xed\xa0\x80 ok\n") }

// UTF16NoBOM is little-endian UTF-16 text without a byte order mark.
func UTF16NoBOM(s string) []byte {
	var b []byte
	for _, r := range s {
		b = binary.LittleEndian.AppendUint16(b, uint16(r))
	}
	return b
}

// File is one file of the hostile corpus. MustFail says Weft must refuse
// it; otherwise it may read it or refuse it, clearly either way.
type File struct {
	Name     string
	Data     []byte
	MustFail bool
}

// Corpus is the hostile corpus that the integration test and the hostile
// benchmark send through every upload path: files built to hurt readers
// and decoders, each within the default upload limits.
func Corpus() []File {
	files := []File{
		{"xref-bomb.pdf", XrefBomb(), true},
		{"prev-loop.pdf", PrevLoop(), true},
		{"cyclic-pages.pdf", CyclicPages(), true},
		{"huge-length.pdf", HugeLength(), true},
		{"deep-arrays.pdf", DeepPDF(100_000), true},
		{"deep-dicts.pdf", DeepDictPDF(100_000), true},
		{"deep-content.pdf", DeepContentPDF(100_000), false},
		{"zip-bomb.docx", ZipBomb(1 << 30), true},
		{"nested-zips.docx", NestedZipDOCX(8), false},
		{"many-entries.docx", ManyEntriesDOCX(20_000), false},
		{"deep.docx", DeepDOCX(100_000), false},
		{"png-bomb.png", PNGBomb(), false},
		{"png-huge.png", PNGHugeHeader(100_000, 100_000), true},
		{"jpeg-huge.jpg", JPEGHugeHeader(), true},
		{"gif-huge.gif", GIFHugeHeader(), true},
		{"webp-huge.webp", WebPHugeHeader(), true},
		{"polyglot.gif", GIFHTMLPolyglot(), false},
		{"deep.html", DeepHTML(100_000), false},
		{"invalid-utf8.txt", InvalidUTF8(), false},
		{"utf16.txt", UTF16NoBOM("a text in UTF-16 without a byte order mark\n"), false},
	}
	cases := MarkdownCases()
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		files = append(files, File{"md-" + n + ".md", cases[n], false})
	}
	return files
}
