package extract

import (
	"errors"
	"strings"
	"testing"

	"weft/internal/hostile"
)

func TestDetectTellsFormatsByTheirContentAndRefusesTheRest(t *testing.T) {
	pdf := twoPagePDF()
	docx := docxFile(t, para("", "hi"))
	xlsx := hostile.Zip("_rels/.rels", `<Relationships><Relationship Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>`,
		"xl/workbook.xml", "<workbook/>")
	tests := []struct {
		name, file string
		data       []byte
		want       string // "" when refused
	}{
		{"a PDF is a PDF", "report.pdf", pdf, FormatPDF},
		{"a PDF named .txt is still a PDF", "report.txt", pdf, FormatPDF},
		{"a Word document is DOCX", "letter.docx", docx, FormatDOCX},
		{"a Word document without its extension is DOCX", "letter", docx, FormatDOCX},
		{"an HTML page is HTML", "page.html", []byte("<p>hi</p>"), FormatHTML},
		{"an .htm name makes text HTML", "PAGE.HTM", []byte("hello"), FormatHTML},
		{"text named .txt that clearly starts like HTML is HTML", "saved.txt", []byte("\ufeff  <!DOCTYPE html><html><p>x"), FormatHTML},
		{"XHTML after an XML declaration and a comment is HTML", "x", []byte("<?xml version=\"1.0\"?>\n<!-- c -->\n<html xmlns=\"http://www.w3.org/1999/xhtml\">"), FormatHTML},
		{"text that mentions the PDF signature stays text", "notes.md", []byte("PDF files start with %PDF-1.7 and end with %%EOF."), FormatMarkdown},
		{"a fragment of tags named .txt stays text", "notes.txt", []byte("<p>not a page</p>"), FormatText},
		{"Markdown is recognized by .md", "README.md", []byte("# Title"), FormatMarkdown},
		{"Markdown is recognized by .markdown", "a/b/notes.Markdown", []byte("text"), FormatMarkdown},
		{"CSV is recognized by .csv", "data.csv", []byte("a,b\n1,2"), FormatCSV},
		{"text without an extension is text", "LICENSE", []byte("MIT"), FormatText},
		{"text with an unknown extension is text", "server.log", []byte("started"), FormatText},
		{"Latin-1 text is text", "old.txt", []byte("caf\xe9 cr\xe8me"), FormatText},
		{"UTF-16 text is text", "win.txt", utf16Bytes("hello", false, true), FormatText},
		{"an empty text file is text", "empty.txt", nil, FormatText},
		{"text named .pdf is refused", "fake.pdf", []byte("just some text"), ""},
		{"text named .docx is refused", "fake.docx", []byte("just some text"), ""},
		{"an empty .pdf is refused", "empty.pdf", nil, ""},
		{"a PNG image is refused", "image.png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), ""},
		{"a PNG named .txt is refused", "image.txt", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), ""},
		{"an ELF executable is refused", "tool", []byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00"), ""},
		{"a Windows executable is refused", "setup.exe", []byte("MZ\x90\x00\x03\x00\x00\x00\x04\x00"), ""},
		{"random binary is refused", "blob.txt", []byte(strings.Repeat("\x00\x01\x02\x03\xfe\xff", 100)), ""},
		{"a ZIP that is not a Word document is refused", "archive.zip", hostile.Zip("a.txt", "hi"), ""},
		{"a .docx without a document inside is refused", "broken.docx", hostile.Zip("word/styles.xml", "<x/>"), ""},
		{"a spreadsheet is refused", "sheet.xlsx", xlsx, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.file, tt.data)
			if tt.want != "" {
				if err != nil || got != tt.want {
					t.Fatalf("Detect = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Detect = %q, %v; want ErrUnsupported", got, err)
			}
			if !strings.Contains(err.Error(), "Weft reads PDF, DOCX, HTML, Markdown, plain text and CSV") {
				t.Errorf("message %q does not name the supported formats", err)
			}
		})
	}
}

func TestDetectRefusesAZipWhoseDirectoryIsTooLargeToReadInTheServer(t *testing.T) {
	_, err := Detect("many.docx", hostile.ManyEntriesDOCX(maxZipEntries+1))
	var de *DetectError
	if !errors.As(err, &de) || !strings.Contains(de.Reason, "too many parts") {
		t.Fatalf("Detect = %v, want the too-many-parts refusal", err)
	}
	if f, err := Detect("ok.docx", hostile.ManyEntriesDOCX(10)); err != nil || f != FormatDOCX {
		t.Fatalf("a DOCX with a few parts = %q, %v", f, err)
	}
}
