package media

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
	"weft/internal/hostile"

	"weft/rag"
)

func TestExtractTextReadsDocumentsWithTheirHeadings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		format string
		data   []byte
		want   string
	}{
		{"a PDF gives the text of its pages", rag.FormatPDF,
			hostile.PDFPages("BT /F1 12 Tf 72 700 Td (Hello page one) Tj ET", "BT /F1 12 Tf 72 700 Td (Page two) Tj ET"),
			"Hello page one\n\nPage two"},
		{"Markdown keeps its headings above their text", rag.FormatMarkdown,
			[]byte("# Guide\n\nIntro text.\n\n## Install\n\nRun it.\n\n## Use\n\nClick it.\n"),
			"# Guide\n\nIntro text.\n\n## Install\n\nRun it.\n\n## Use\n\nClick it."},
		{"a Word file gives its paragraphs", rag.FormatDOCX,
			docxOf(t, "<w:p><w:r><w:t>First.</w:t></w:r></w:p><w:p><w:r><w:t>Second.</w:t></w:r></w:p>"),
			"First.\n\nSecond."},
		{"HTML gives its text, never its script", rag.FormatHTML,
			[]byte("<!doctype html><html><head><script>alert(1)</script></head><body><h1>Title</h1><p>Body text.</p></body></html>"),
			"# Title\n\nBody text."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, truncated, err := ExtractText(context.Background(), tt.format, tt.data, 0)
			if err != nil {
				t.Fatalf("ExtractText: %v", err)
			}
			if got != tt.want || truncated {
				t.Errorf("ExtractText = %q, %v; want %q, false", got, truncated, tt.want)
			}
		})
	}
}

func TestExtractTextCutsLongTextWithoutSplittingACharacter(t *testing.T) {
	t.Parallel()
	doc := strings.Repeat("héllo wörld ✓ ", 1000)
	got, truncated, err := ExtractText(context.Background(), rag.FormatText, []byte(doc), 25)
	if err != nil {
		t.Fatal(err)
	}
	if !truncated || utf8.RuneCountInString(got) != 25 || !utf8.ValidString(got) || !strings.HasPrefix(doc, got) {
		t.Errorf("ExtractText = %q (%d characters), truncated %v; want the first 25 characters", got, utf8.RuneCountInString(got), truncated)
	}
	full, truncated, err := ExtractText(context.Background(), rag.FormatText, []byte("short"), 5)
	if err != nil || full != "short" || truncated {
		t.Errorf("ExtractText(5 of 5) = %q, %v, %v; want it whole", full, truncated, err)
	}
}

func TestExtractTextRefusesUnreadableDocumentsInWordsForTheUser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		format string
		data   []byte
		want   string
	}{
		{"a damaged PDF", rag.FormatPDF, []byte("%PDF-1.4\ngarbage"), "PDF"},
		{"a damaged DOCX", rag.FormatDOCX, []byte("PK\x03\x04 not really"), "DOCX file is damaged"},
		{"an unknown format", "exe", []byte("MZ"), "Weft accepts images"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := ExtractText(context.Background(), tt.format, tt.data, 0)
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ExtractText = %v; want a refusal saying %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "/") || strings.Contains(err.Error(), "panic") {
				t.Errorf("message %q shows internals", err.Error())
			}
		})
	}
}

func TestExtractTextStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := ExtractText(ctx, rag.FormatText, []byte("words"), 0)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrRefused) {
		t.Errorf("ExtractText = %v; want context.Canceled, not a refusal", err)
	}
}
