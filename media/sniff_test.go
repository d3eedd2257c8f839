package media

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unicode/utf16"
	"weft/internal/hostile"

	"weft/extract"
	"weft/rag"
)

func TestSniffTellsWhatAFileIsFromItsContent(t *testing.T) {
	t.Parallel()
	// A GIF header (1 × 1, no colour table) followed by a script: a
	// polyglot a browser could run as HTML if it sniffed it.
	gifHTML := append([]byte("GIF89a\x01\x00\x01\x00\x00\x00\x00"), "<script>alert(document.cookie)</script>"...)
	tests := []struct {
		name     string
		file     string
		data     []byte
		want     Sniffed
		refused  string // part of the refusal's message, if refused
		notShown string // what the message must not contain
	}{
		{"a PNG is an image with its size", "photo.png", hostile.PNGOf(40, 30), Sniffed{Kind: KindImage, MIME: "image/png", Width: 40, Height: 30}, "", ""},
		{"a JPEG is an image", "photo.jpg", hostile.JPEGOf(8, 16), Sniffed{Kind: KindImage, MIME: "image/jpeg", Width: 8, Height: 16}, "", ""},
		{"a GIF is an image", "anim.gif", hostile.GIFOf(5, 5), Sniffed{Kind: KindImage, MIME: "image/gif", Width: 5, Height: 5}, "", ""},
		{"a WebP is an image", "pic.webp", hostile.WebP1x1(), Sniffed{Kind: KindImage, MIME: "image/webp", Width: 1, Height: 1}, "", ""},
		{"a PNG named .txt is still a PNG", "notes.txt", hostile.PNGOf(2, 2), Sniffed{Kind: KindImage, MIME: "image/png", Width: 2, Height: 2}, "", ""},
		{"a GIF with a script after its header is a GIF, served as such with nosniff", "cat.gif", gifHTML, Sniffed{Kind: KindImage, MIME: "image/gif", Width: 1, Height: 1}, "", ""},
		{"an HTML page named photo.png is an HTML document, never an image", "photo.png",
			[]byte("<!DOCTYPE html><html><body><script>alert(1)</script><p>Hi</p></body></html>"),
			Sniffed{Kind: KindDocument, MIME: "text/html", Format: rag.FormatHTML}, "", ""},
		{"a PDF is a document", "paper.pdf", hostile.PDFPages("BT /F1 12 Tf 72 700 Td (Hello) Tj ET"), Sniffed{Kind: KindDocument, MIME: "application/pdf", Format: rag.FormatPDF}, "", ""},
		{"a Word file is a document", "letter.docx", docxOf(t, "<w:p><w:r><w:t>Dear</w:t></w:r></w:p>"),
			Sniffed{Kind: KindDocument, MIME: "application/vnd.openxmlformats-officedocument.wordprocessingml.document", Format: rag.FormatDOCX}, "", ""},
		{"Markdown is told by its extension", "notes.md", []byte("# Notes\n\nSome *text*."), Sniffed{Kind: KindDocument, MIME: "text/markdown", Format: rag.FormatMarkdown}, "", ""},
		{"CSV is told by its extension", "data.csv", []byte("a,b\n1,2\n"), Sniffed{Kind: KindDocument, MIME: "text/csv", Format: rag.FormatCSV}, "", ""},
		{"other text is plain text", "readme", []byte("just words"), Sniffed{Kind: KindDocument, MIME: "text/plain", Format: rag.FormatText}, "", ""},
		{"an SVG with a script named .png is refused", "photo.png",
			[]byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`), Sniffed{}, "photo.png: SVG images are not accepted (they can carry scripts)", ""},
		{"an SVG named .svg is refused", "logo.svg",
			[]byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><rect/></svg>`), Sniffed{}, "SVG images are not accepted", ""},
		{"an SVG behind a declaration, comment and doctype, with a namespace prefix, is refused", "x.xml",
			[]byte("\ufeff<?xml version=\"1.0\"?>\n<!-- drawn -->\n<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" \"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">\n<svg:svg xmlns:svg=\"http://www.w3.org/2000/svg\"/>"),
			Sniffed{}, "SVG images are not accepted", ""},
		{"an SVG in UTF-16 is refused", "logo.txt", utf16LE(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`), Sniffed{}, "SVG images are not accepted", ""},
		{"a PNG signature over garbage is refused", "photo.png", append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0xde, 0xad}, 100)...), Sniffed{}, "photo.png looks like a PNG image but cannot be read", ""},
		{"a JPEG signature over garbage is refused", "photo.jpg", []byte("\xff\xd8\xff\xe0garbage garbage"), Sniffed{}, "looks like a JPEG image but cannot be read", ""},
		{"a PNG claiming 100,000 × 100,000 pixels is refused before decoding", "bomb.png", hostile.PNGHeader(100_000, 100_000), Sniffed{}, "bomb.png is 100,000 × 100,000 pixels; the limit is 50 megapixels", ""},
		{"a PNG with a side over 20,000 pixels is refused", "strip.png", hostile.PNGHeader(20_001, 10), Sniffed{}, "20,000 pixels a side", ""},
		{"a PNG just within the limits is accepted", "big.png", hostile.PNGHeader(10_000, 5_000), Sniffed{Kind: KindImage, MIME: "image/png", Width: 10_000, Height: 5_000}, "", ""},
		{"a text file named .pdf is refused", "report.pdf", []byte("This is not a PDF at all.\n"), Sniffed{}, "report.pdf: this .pdf file holds plain text, not what its name says. Weft accepts images (PNG, JPEG, GIF, WebP) and documents (PDF, DOCX, plain text, Markdown, CSV, HTML)", ""},
		{"an executable is refused, naming what is accepted", "setup.exe", append([]byte("\x7fELF\x02\x01\x01\x00"), make([]byte, 64)...), Sniffed{}, "setup.exe: this kind of file is not accepted. Weft accepts images (PNG, JPEG, GIF, WebP) and documents", ""},
		{"a ZIP that is not a Word file, named .docx, is refused", "letter.docx", hostile.Zip("a.txt", "hi"), Sniffed{}, "this .docx file is not a Word document", ""},
		{"a BMP is refused", "old.bmp", append([]byte("BM"), make([]byte, 60)...), Sniffed{}, "Weft accepts images (PNG, JPEG, GIF, WebP)", ""},
		{"an empty file is refused", "empty.txt", nil, Sniffed{}, "empty.txt is empty", ""},
		{"a refusal shows the file's name, never a path", "../../etc/evil.svg", []byte(`<svg/>`), Sniffed{}, "evil.svg: SVG", "../"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Sniff(tt.file, tt.data)
			if tt.refused != "" {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("Sniff = %+v, %v; want a refusal", got, err)
				}
				if !strings.Contains(err.Error(), tt.refused) {
					t.Errorf("message %q does not say %q", err.Error(), tt.refused)
				}
				if tt.notShown != "" && strings.Contains(err.Error(), tt.notShown) {
					t.Errorf("message %q shows %q", err.Error(), tt.notShown)
				}
				return
			}
			if err != nil {
				t.Fatalf("Sniff: %v", err)
			}
			if got != tt.want {
				t.Errorf("Sniff = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAZipBombNamedDocxIsRefusedWhenReadWithoutUnpackingItAll(t *testing.T) {
	t.Parallel()
	// Just over what rag lets a DOCX unpack to; it stops there.
	bomb := docxBomb(t, extract.DefaultMaxUnzipped+1<<20)
	if len(bomb) > 2<<20 {
		t.Fatalf("the bomb is %d bytes; it should be small", len(bomb))
	}
	s, err := Sniff("report.docx", bomb)
	if err != nil {
		t.Fatalf("Sniff: %v", err)
	}
	if s.Format != rag.FormatDOCX {
		t.Fatalf("Sniff = %+v, want a DOCX document", s)
	}
	text, _, err := ExtractText(context.Background(), s.Format, bomb, 0)
	if !errors.Is(err, ErrRefused) || !errors.Is(err, extract.ErrTooLarge) {
		t.Fatalf("ExtractText = %q, %v; want a refusal for size", text, err)
	}
	if want := "expands to more than 100 MB when unpacked; it may be damaged or a zip bomb"; !strings.Contains(err.Error(), want) {
		t.Errorf("message %q does not say %q", err.Error(), want)
	}
}

func utf16LE(s string) []byte {
	b := []byte{0xff, 0xfe}
	for _, u := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, u)
	}
	return b
}
