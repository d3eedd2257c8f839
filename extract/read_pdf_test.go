package extract

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"weft/internal/hostile"

	"github.com/ledongthuc/pdf"
)

// pdfDeflated is a FlateDecode stream object holding content.
func pdfDeflated(content string) string {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write([]byte(content))
	w.Close()
	return hostile.PDFStream("/Filter /FlateDecode", z.String())
}

func twoPagePDF() []byte {
	return hostile.PDFPages(
		"BT /F1 12 Tf 72 700 Td (Hello page one) Tj 0 -14 Td (Second line) Tj ET",
		"BT /F1 12 Tf 72 700 Td (Page two) Tj ET",
	)
}

func TestReadPDFReadsTheTextOfEveryPageWithItsPageNumber(t *testing.T) {
	formDoc := hostile.PDFWithTrailer("",
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /Resources << /XObject << /X1 5 0 R >> >> /Contents 4 0 R >>",
		hostile.PDFStream("", "q 1 0 0 1 0 0 cm /X1 Do Q"),
		hostile.PDFStream("/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 6 0 R >> >>", "BT /F1 12 Tf 72 700 Td (Inside a form) Tj ET"),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	)
	selfDrawingForm := hostile.PDFWithTrailer("",
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /Resources << /XObject << /X1 5 0 R >> >> /Contents 4 0 R >>",
		hostile.PDFStream("", "/X1 Do"),
		hostile.PDFStream("/Type /XObject /Subtype /Form /BBox [0 0 1 1] /Resources << /XObject << /X1 5 0 R >> /Font << /F1 6 0 R >> >>",
			"1 0 0 1 0 -15 cm BT /F1 12 Tf 72 700 Td (again) Tj ET /X1 Do"),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	)
	compressed := hostile.PDFWithTrailer("",
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
		pdfDeflated("BT /F1 12 Tf 72 700 Td (Deflated text) Tj ET"),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	)
	cmap := "/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Adobe-Identity-UCS def /CMapType 2 def\n" +
		"1 begincodespacerange <0000> <FFFF> endcodespacerange\n" +
		"4 beginbfchar <0001> <0048> <0002> <0069> <0003> <0020> <0004> <4E16> endbfchar\n" +
		"endcmap CMapName currentdict /CMap defineresource pop end end"
	cidFont := hostile.PDFWithTrailer("",
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
		// With the W widths "Hi" is 13.2 wide, so a move of 20 leaves a gap;
		// with the default widths it would be 24 and overlap.
		hostile.PDFStream("", "BT /F1 12 Tf 72 700 Td <00010002> Tj 20 0 Td <0001> Tj <0003> Tj <0004> Tj ET"),
		"<< /Type /Font /Subtype /Type0 /BaseFont /Foo /Encoding /Identity-H /DescendantFonts [7 0 R] /ToUnicode 6 0 R >>",
		hostile.PDFStream("", cmap),
		"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /Foo /DW 1000 /W [1 [500 600] 3 4 250] >>",
	)
	ligature := hostile.PDFWithTrailer("",
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
		hostile.PDFStream("", "BT /F1 12 Tf 72 700 Td (speciAcation) Tj ET"),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman /Encoding << /Differences [65 /fi] >> >>",
	)
	pdf20 := bytes.Replace(twoPagePDF(), []byte("%PDF-1.4"), []byte("%PDF-2.0"), 1)
	tests := []struct {
		name string
		data []byte
		want []Block
	}{
		{"two pages give one block each, with line breaks from text positioning", twoPagePDF(),
			[]Block{{Text: "Hello page one\nSecond line", Page: 1}, {Text: "Page two", Page: 2}}},
		{"a wide kerning gap in TJ becomes a space and a small one does not",
			hostile.PDFPages("BT /F1 12 Tf 72 700 Td [(Hel) -20 (lo) -400 (World)] TJ ET"),
			[]Block{{Text: "Hello World", Page: 1}}},
		{"a move along the line becomes a space and a big drop a paragraph break",
			hostile.PDFPages("BT /F1 12 Tf 72 700 Td (Left) Tj 200 0 Td (right) Tj 0 -14 Td (next) Tj 0 -40 Td (para) Tj ET"),
			[]Block{{Text: "Left right\nnext\n\npara", Page: 1}}},
		{"T* and ' move to the next line by the leading",
			hostile.PDFPages("BT /F1 10 Tf 14 TL 72 700 Td (one) Tj T* (two) Tj (three) ' ET"),
			[]Block{{Text: "one\ntwo\nthree", Page: 1}}},
		{"a page without text is left out", hostile.PDFPages("BT /F1 12 Tf 72 700 Td (Only) Tj ET", "0 0 m 10 10 l S"),
			[]Block{{Text: "Only", Page: 1}}},
		{"text drawn by a form XObject is read", formDoc, []Block{{Text: "Inside a form", Page: 1}}},
		{"a form that draws itself stops after a few levels", selfDrawingForm,
			[]Block{{Text: "again\nagain\nagain\nagain", Page: 1}}},
		{"a Type0 font is decoded through its ToUnicode map and measured by its W widths", cidFont,
			[]Block{{Text: "Hi H 世", Page: 1}}},
		{"a ligature is spelled out", ligature, []Block{{Text: "specification", Page: 1}}},
		{"text drawn twice on the same spot (a fake bold) is read once",
			hostile.PDFPages("BT /F1 12 Tf 72 700 Td (Bold) Tj 30 0 Td (face) Tj ET BT /F1 12 Tf 72.5 700 Td (Bold) Tj 30 0 Td (face) Tj ET"),
			[]Block{{Text: "Bold face", Page: 1}}},
		{"a FlateDecode content stream is read", compressed, []Block{{Text: "Deflated text", Page: 1}}},
		{"a PDF 2.0 header is accepted", pdf20,
			[]Block{{Text: "Hello page one\nSecond line", Page: 1}, {Text: "Page two", Page: 2}}},
		{"junk after %%EOF is ignored", append(twoPagePDF(), "\x00\x00garbage"...),
			[]Block{{Text: "Hello page one\nSecond line", Page: 1}, {Text: "Page two", Page: 2}}},
		{"binary junk before the header is skipped", append([]byte("\x00\x05junk\x00\x00"), twoPagePDF()...),
			[]Block{{Text: "Hello page one\nSecond line", Page: 1}, {Text: "Page two", Page: 2}}},
		{"a page whose content breaks part-way keeps the text before the break",
			hostile.PDFPages("BT /F1 12 Tf 72 700 Td (Kept) Tj ET 1 begin BT (Lost) Tj ET", "BT /F1 12 Tf 72 700 Td (Fine) Tj ET"),
			[]Block{{Text: "Kept", Page: 1}, {Text: "Fine", Page: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadInProcess(context.Background(), FormatPDF, tt.data, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			assertBlocks(t, got, tt.want)
		})
	}
}

func TestReadPDFRefusesHostileFilesClearly(t *testing.T) {
	valid := twoPagePDF()
	cyclicTree := hostile.PDFWithTrailer("",
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [2 0 R 2 0 R] /Count 1 >>",
	)
	// Every inner node lists the next one twice: 2^40 paths without a budget.
	branching := []string{"<< /Type /Catalog /Pages 2 0 R >>"}
	for k := 2; k <= 41; k++ {
		branching = append(branching, fmt.Sprintf("<< /Type /Pages /Kids [%d 0 R %d 0 R] /Count 1 >>", k+1, k+1))
	}
	branching = append(branching, "<< /Type /Other >>")
	lyingCount := bytes.Replace(hostile.PDFPages("BT (a) Tj ET", "BT (b) Tj ET", "BT (c) Tj ET"), []byte("/Count 3"), []byte("/Count 1"), 1)
	badPassword := hostile.PDFWithTrailer(fmt.Sprintf("/ID [(%s)] /Encrypt << /Filter /Standard /V 1 /R 2 /Length 40 /O (%s) /U (%s) /P 0 >>",
		strings.Repeat("I", 16), strings.Repeat("O", 32), strings.Repeat("U", 32)), "<< /Type /Catalog >>")
	aes256 := hostile.PDFWithTrailer("/ID [(0123456789abcdef)] /Encrypt << /Filter /Standard /V 5 /R 6 /Length 256 >>", "<< /Type /Catalog >>")
	imageOnly := hostile.PDFPages("q 100 0 0 100 0 0 cm 0 0 m 1 1 l S Q")
	tests := []struct {
		name    string
		data    []byte
		lim     Limits
		want    string // in the message
		tooBig  bool
		noPanic bool
	}{
		{"a truncated PDF", valid[:len(valid)/2], Limits{}, "damaged or not a valid PDF", false, true},
		{"garbage after the signature", []byte("%PDF-1.4\n" + strings.Repeat("\x8f\x01garbage", 200)), Limits{}, "damaged or not a valid PDF", false, true},
		{"a PDF that is only a signature", []byte("%PDF-"), Limits{}, "damaged or not a valid PDF", false, true},
		{"not a PDF at all", []byte("hello"), Limits{}, "not a PDF", false, true},
		{"more pages than MaxPages", valid, Limits{MaxPages: 1}, "more than 1 pages", true, true},
		{"a page count that lies", lyingCount, Limits{MaxPages: 2}, "more than 2 pages", true, true},
		{"a page tree that refers to itself", cyclicTree, Limits{}, "page tree does not end", false, true},
		{"a page tree that branches exponentially", hostile.PDFWithTrailer("", branching...), Limits{}, "page tree does not end", false, true},
		{"a password", badPassword, Limits{}, "protected by a password", false, true},
		{"an encryption the library lacks", aes256, Limits{}, "encrypted in a way", false, true},
		{"no text at all", imageOnly, Limits{}, "no text to read", false, true},
		{"more text than MaxText", valid, Limits{MaxText: 20}, "more than 20 characters", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name+" gives a clear error", func(t *testing.T) {
			_, err := ReadInProcess(context.Background(), FormatPDF, tt.data, tt.lim)
			assertReadError(t, err, tt.want, tt.tooBig)
		})
	}
}

func TestReadPDFWithACyclicParentEnds(t *testing.T) {
	// The library's own inheritance lookup loops forever on this.
	data := hostile.PDFWithTrailer("",
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 /Parent 2 0 R >>",
		"<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>",
		hostile.PDFStream("", "BT /F1 12 Tf 72 700 Td (Still read) Tj ET"),
	)
	done := make(chan struct{})
	var got []Block
	var err error
	go func() {
		got, err = ReadInProcess(context.Background(), FormatPDF, data, Limits{})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Read did not return")
	}
	if err != nil {
		t.Fatal(err)
	}
	assertBlocks(t, got, []Block{{Text: "Still read", Page: 1}})
}

func TestReadPDFStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ReadInProcess(ctx, FormatPDF, twoPagePDF(), Limits{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestReadPDFSkipsAPageWithTooMuchContent(t *testing.T) {
	huge := "BT /F1 12 Tf 72 700 Td (" + strings.Repeat("x", pdfMaxContent) + ") Tj ET"
	got, err := ReadInProcess(context.Background(), FormatPDF, hostile.PDFPages(huge, "BT /F1 12 Tf 72 700 Td (Small) Tj ET"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	assertBlocks(t, got, []Block{{Text: "Small", Page: 2}})
}

func TestPDFFixturesAreReadByTheLibraryItself(t *testing.T) {
	// Guards the hand-made fixtures: the xref offsets must be right for
	// ledongthuc/pdf's own page lookup and plain-text extraction.
	data := twoPagePDF()
	doc, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if n := doc.NumPage(); n != 2 {
		t.Fatalf("NumPage = %d", n)
	}
	for i, want := range []string{"Hello page oneSecond line", "Page two"} {
		got, err := doc.Page(i + 1).GetPlainText(nil)
		if err != nil || strings.TrimSpace(got) != want {
			t.Errorf("page %d: GetPlainText = %q, %v; want %q", i+1, got, err, want)
		}
	}
}
