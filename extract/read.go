package extract

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Formats a knowledge base accepts.
const (
	FormatPDF      = "pdf"
	FormatDOCX     = "docx"
	FormatHTML     = "html"
	FormatMarkdown = "markdown"
	FormatText     = "text"
	FormatCSV      = "csv"
)

// ErrUnsupported is returned for a file that is none of the supported
// formats. Its message names them, so it can be shown as is.
var ErrUnsupported = errors.New("unsupported file type: Weft reads PDF, DOCX, HTML, Markdown, plain text and CSV")

// ErrTooLarge is wrapped by the ReadError of a document that exceeds its
// Limits.
var ErrTooLarge = errors.New("document too large")

// Block is a piece of a document with where it stands. It crosses the
// jail's pipe as JSON.
//
// Heading text itself lives in Headings, not in Text.
type Block struct {
	Text     string   `json:"t"`
	Headings []string `json:"h,omitempty"`  // heading path, outermost first (HTML h1-h6, Markdown #, DOCX Heading 1..9 styles / Title)
	Page     int      `json:"p,omitempty"`  // 1-based page for PDF, 0 otherwise
	Table    bool     `json:"tb,omitempty"` // a table, rendered as text rows ("a | b | c" lines, header first)
}

// Limits bound what reading may cost; zero fields take the defaults.
type Limits struct {
	MaxText     int   // runes of extracted text (default 20_000_000); beyond: a ReadError wrapping ErrTooLarge
	MaxUnzipped int64 // total bytes decompressed from a DOCX (default 100 MB); beyond: a ReadError wrapping ErrTooLarge
	MaxPages    int   // PDF pages (default 5_000); beyond: a ReadError wrapping ErrTooLarge
}

// Default limits.
const (
	DefaultMaxText     = 20_000_000
	DefaultMaxUnzipped = 100 << 20
	DefaultMaxPages    = 5_000
)

func (l Limits) withDefaults() Limits {
	if l.MaxText <= 0 {
		l.MaxText = DefaultMaxText
	}
	if l.MaxUnzipped <= 0 {
		l.MaxUnzipped = DefaultMaxUnzipped
	}
	if l.MaxPages <= 0 {
		l.MaxPages = DefaultMaxPages
	}
	return l
}

// ReadError is a document that cannot be read. Error is a message for the
// user (no paths, no Go internals); Unwrap gives the cause for logs and for
// errors.Is(err, ErrTooLarge).
type ReadError struct {
	Msg string
	Err error
}

func (e *ReadError) Error() string { return e.Msg }
func (e *ReadError) Unwrap() error { return e.Err }

// UserMessage is Msg: a ReadError's message is written for the user.
func (e *ReadError) UserMessage() string { return e.Msg }

func readErr(cause error, format string, args ...any) *ReadError {
	return &ReadError{Msg: fmt.Sprintf(format, args...), Err: cause}
}

// ReadInProcess extracts the blocks of a document in the given format (see
// Detect) in the calling process. It never panics, checks ctx between pages
// and blocks (returning ctx.Err()), and stays within lim; but a hostile file
// can still make a library allocate without bound or loop, which only a
// process boundary stops. It is for the jail's child and for fuzzing:
// everything else calls Read. An unknown format gives ErrUnsupported; a
// document that cannot be read gives a *ReadError.
func ReadInProcess(ctx context.Context, format string, data []byte, lim Limits) (blocks []Block, err error) {
	r := &reader{ctx: ctx, lim: lim.withDefaults()}
	defer func() {
		// The readers, and above all the PDF library, must not take the
		// process down on a hostile file.
		if p := recover(); p != nil {
			blocks = nil
			err = readErr(fmt.Errorf("panic: %v", p), "Weft could not read this document: it seems to be damaged.")
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch format {
	case FormatPDF:
		err = readPDF(r, data)
	case FormatDOCX:
		err = readDOCX(r, data)
	case FormatHTML:
		err = readHTML(r, data)
	case FormatMarkdown:
		err = readMarkdown(r, data)
	case FormatText:
		err = readText(r, data)
	case FormatCSV:
		err = readCSV(r, data)
	default:
		return nil, ErrUnsupported
	}
	if err != nil {
		return nil, err
	}
	return r.blocks, nil
}

// reader collects the blocks of one document and enforces the text limit
// and cancellation.
type reader struct {
	ctx    context.Context
	lim    Limits
	runes  int // runes counted so far against lim.MaxText
	blocks []Block
}

// count charges n runes of extracted text against the limit.
func (r *reader) count(n int) error {
	r.runes += n
	if r.runes > r.lim.MaxText {
		return readErr(ErrTooLarge, "The document has more than %s characters of text; split it into smaller files.", thousands(r.lim.MaxText))
	}
	return nil
}

// emit cleans a block's text and keeps it unless it is blank.
func (r *reader) emit(b Block) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	b.Text = cleanText(b.Text)
	if b.Text == "" {
		return nil
	}
	if err := r.count(utf8.RuneCountInString(b.Text)); err != nil {
		return err
	}
	r.blocks = append(r.blocks, b)
	return nil
}

// cleanText drops control characters (NULs included) but newlines and tabs,
// trims every line's trailing blanks, keeps at most one empty line in a row
// and trims the whole.
func cleanText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.Map(func(c rune) rune {
		switch {
		case c == '\n' || c == '\t':
			return c
		case c == '\r' || c == '\v' || c == '\f' || c == '\u2028' || c == '\u2029':
			return '\n'
		case c == '\u00a0':
			return ' '
		case c == utf8.RuneError || c == '\ufeff' || unicode.IsControl(c):
			return -1
		}
		return c
	}, s)
	var b strings.Builder
	b.Grow(len(s))
	blank := 0
	for line := range strings.Lines(s) {
		line = strings.TrimRightFunc(line, unicode.IsSpace)
		if line == "" {
			blank++
			continue
		}
		if b.Len() > 0 {
			if blank > 0 {
				b.WriteString("\n\n")
			} else {
				b.WriteByte('\n')
			}
		}
		blank = 0
		b.WriteString(line)
	}
	return strings.TrimSpace(b.String())
}

// headingPath tracks the headings above the current position. Level 0 is a
// document title, 1..9 are heading levels.
type headingPath struct {
	levels []int
	texts  []string
	cur    []string // shared, never mutated: every change builds a new slice
}

func (h *headingPath) set(level int, text string) {
	text = strings.Join(strings.Fields(text), " ")
	if text == "" {
		return
	}
	n := len(h.levels)
	for n > 0 && h.levels[n-1] >= level {
		n--
	}
	h.levels = append(h.levels[:n], level)
	h.texts = append(h.texts[:n], text)
	h.cur = append([]string(nil), h.texts...)
}

func (h *headingPath) path() []string { return h.cur }

// tableText renders rows as "a | b | c" lines, the header row first. Cells
// are flattened to one line; rows with no text are dropped.
func tableText(rows [][]string) string {
	var b strings.Builder
	for _, row := range rows {
		cells := make([]string, len(row))
		empty := true
		for i, c := range row {
			cells[i] = strings.Join(strings.Fields(c), " ")
			if cells[i] != "" {
				empty = false
			}
		}
		if empty {
			continue
		}
		b.WriteString(strings.Join(cells, " | "))
		b.WriteByte('\n')
	}
	return b.String()
}

// thousands formats n as 20,000,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
