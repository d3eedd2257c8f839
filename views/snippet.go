package views

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// snippetPart is a piece of a search snippet; Mark pieces matched.
type snippetPart struct {
	Text string
	Mark bool
}

const snippetRadius = 80 // characters of context around the first match

// snippet cuts the text around the first match of any word of q and marks
// every match in it. Matching is case-insensitive for every script (Go's
// regexp folds case by Unicode rules); the parts are escaped when rendered.
func snippet(text, q string) []snippetPart {
	var terms []string
	for _, w := range strings.Fields(q) {
		w = strings.Trim(w, `"'`)
		if w != "" && w != "OR" && !strings.HasPrefix(w, "-") {
			terms = append(terms, regexp.QuoteMeta(w))
		}
	}
	if len(terms) == 0 {
		return []snippetPart{{Text: clipRunes(text, 2*snippetRadius)}}
	}
	re, err := regexp.Compile("(?i)" + strings.Join(terms, "|"))
	if err != nil {
		return []snippetPart{{Text: clipRunes(text, 2*snippetRadius)}}
	}
	first := re.FindStringIndex(text)
	start, end := 0, len(text)
	if first != nil {
		start = backRunes(text, first[0], snippetRadius)
		end = forwardRunes(text, first[1], snippetRadius)
	} else {
		end = forwardRunes(text, 0, 2*snippetRadius)
	}
	window := text[start:end]
	var parts []snippetPart
	if start > 0 {
		parts = append(parts, snippetPart{Text: "…"})
	}
	last := 0
	for _, m := range re.FindAllStringIndex(window, -1) {
		if m[0] > last {
			parts = append(parts, snippetPart{Text: window[last:m[0]]})
		}
		parts = append(parts, snippetPart{Text: window[m[0]:m[1]], Mark: true})
		last = m[1]
	}
	if last < len(window) {
		parts = append(parts, snippetPart{Text: window[last:]})
	}
	if end < len(text) {
		parts = append(parts, snippetPart{Text: "…"})
	}
	return parts
}

// backRunes moves n runes back from byte offset i.
func backRunes(s string, i, n int) int {
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return i
}

// forwardRunes moves n runes forward from byte offset i.
func forwardRunes(s string, i, n int) int {
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}

func clipRunes(s string, n int) string {
	end := forwardRunes(s, 0, n)
	if end < len(s) {
		return s[:end] + "…"
	}
	return s
}
