package media

import (
	"context"
	"errors"
	"strings"

	"weft/extract"
)

// DefaultMaxChars is how much of a document's text ExtractText keeps.
const DefaultMaxChars = 200_000

// ExtractText reads the text of a document in an extract format (Sniffed.Format),
// in extract's jail,
// for the model: blocks in order, separated by blank lines, each run of
// blocks under new headings preceded by those headings as Markdown lines
// ("# Chapter", "## Section"). The text is cut after maxChars characters
// (default DefaultMaxChars), never inside a character, and truncated says
// so. A document without text (a scanned PDF) gives "" and no error.
//
// Reading stays within extract's limits (extract.Limits defaults: 20 million
// characters, 100 MB unpacked from a DOCX whatever its ZIP headers claim,
// 5,000 PDF pages): a decompression bomb is stopped there and refused. A
// document that cannot be read, or that makes the reader run out of memory
// or time or crash, gives an error wrapping ErrRefused whose message is for
// the user; cancellation gives ctx.Err().
func ExtractText(ctx context.Context, format string, data []byte, maxChars int) (text string, truncated bool, err error) {
	if maxChars <= 0 {
		maxChars = DefaultMaxChars
	}
	blocks, err := extract.Read(ctx, format, data, extract.Limits{})
	if err != nil {
		var re *extract.ReadError
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return "", false, err
		case errors.As(err, &re):
			return "", false, refuse(err, "%s", re.Msg)
		case errors.Is(err, extract.ErrUnsupported):
			return "", false, refuse(err, "This document cannot be read: %s.", accepted)
		}
		return "", false, refuse(err, "This document cannot be read; it may be damaged.")
	}
	text, truncated = capRunes(joinBlocks(blocks), maxChars)
	return text, truncated, nil
}

// joinBlocks writes the blocks' text, each new heading before the first
// block under it.
func joinBlocks(blocks []extract.Block) string {
	var b strings.Builder
	var shown []string // heading path already written
	for _, bl := range blocks {
		same := 0
		for same < len(shown) && same < len(bl.Headings) && shown[same] == bl.Headings[same] {
			same++
		}
		for i := same; i < len(bl.Headings); i++ {
			sep(&b)
			b.WriteString(strings.Repeat("#", min(i+1, 6)))
			b.WriteByte(' ')
			b.WriteString(bl.Headings[i])
		}
		shown = bl.Headings
		sep(&b)
		b.WriteString(bl.Text)
	}
	return b.String()
}

func sep(b *strings.Builder) {
	if b.Len() > 0 {
		b.WriteString("\n\n")
	}
}

// capRunes keeps the first max characters of s.
func capRunes(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false // fewer bytes than max means fewer runes too
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i], true
		}
		n++
	}
	return s, false
}

// truncateRunes cuts s to at most max characters, at the last sentence or
// word end before the cut when there is one in the last fifth.
func truncateRunes(s string, max int) string {
	cut, ok := capRunes(s, max)
	if !ok {
		return cut
	}
	floor := len(cut) * 4 / 5
	if i := strings.LastIndexAny(cut, ".!?\n"); i >= floor {
		return cut[:i+1]
	}
	if i := strings.LastIndexAny(cut, " \t"); i >= floor {
		return cut[:i]
	}
	return cut
}
