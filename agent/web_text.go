// Turning a fetched page into text the model reads.

package agent

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html/charset"

	"weft/extract"
	"weft/internal/webfetch"
)

// textKind reports whether a media type is text the agent can read, and
// whether it is HTML.
func textKind(mediaType string) (isHTML, ok bool) {
	switch {
	case mediaType == "text/html" || mediaType == "application/xhtml+xml":
		return true, true
	case strings.HasPrefix(mediaType, "text/"),
		mediaType == "application/json", mediaType == "application/xml",
		strings.HasPrefix(mediaType, "application/") &&
			(strings.HasSuffix(mediaType, "+json") || strings.HasSuffix(mediaType, "+xml")):
		return false, true
	}
	return false, false
}

func notText(mediaType, header string) error {
	if mediaType == "" {
		mediaType = strings.TrimSpace(header)
	}
	if mediaType == "" || len(mediaType) > 100 {
		mediaType = "unknown type"
	}
	return Errorf("the page is not text (%s)", mediaType)
}

// decode turns the body into UTF-8 by its declared or detected charset.
func decode(data []byte, contentType string) string {
	enc, _, _ := charset.DetermineEncoding(data, contentType)
	if out, err := enc.NewDecoder().Bytes(data); err == nil {
		data = out
	}
	return strings.ToValidUTF8(string(data), "\uFFFD")
}

// htmlText renders a page as readable text: its title, then rag's reading
// of it, in extract's jail (no scripts, styles or navigation; whitespace collapsed), with the
// headings above each paragraph written where they change.
func htmlText(ctx context.Context, page string) (string, error) {
	blocks, err := extract.Read(ctx, extract.FormatHTML, []byte(page), extract.Limits{MaxText: len(page) + 1})
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("web fetch: %w", context.Cause(ctx))
		}
		return "", Errorf("the page could not be read as text")
	}
	var b strings.Builder
	if title := webfetch.Title(page); title != "" {
		b.WriteString("Title: " + title + "\n\n")
	}
	var prev []string
	for _, bl := range blocks {
		same := 0
		for same < len(prev) && same < len(bl.Headings) && prev[same] == bl.Headings[same] {
			same++
		}
		for i := same; i < len(bl.Headings); i++ {
			b.WriteString(strings.Repeat("#", min(i+1, 6)) + " " + bl.Headings[i] + "\n\n")
		}
		prev = bl.Headings
		b.WriteString(strings.TrimRight(bl.Text, "\n") + "\n\n")
	}
	return strings.TrimSpace(b.String()), nil
}

// plainText cleans text that is not HTML: control characters dropped (but
// newlines and tabs), line ends trimmed, at most one blank line in a row.
func plainText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.Map(func(c rune) rune {
		switch {
		case c == '\n' || c == '\t':
			return c
		case c == '\r':
			return '\n'
		case c == utf8.RuneError || c == '\ufeff' || unicode.IsControl(c):
			return -1
		}
		return c
	}, s)
	var b strings.Builder
	blank := false
	for line := range strings.Lines(s) {
		line = strings.TrimRightFunc(line, unicode.IsSpace)
		if line == "" {
			blank = b.Len() > 0
			continue
		}
		if blank {
			b.WriteByte('\n')
			blank = false
		}
		b.WriteString(line + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// cutText cuts s to at most n bytes without splitting a character.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
