package webfetch

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Title returns the text of the page's <title>, looked for before the
// body only (an SVG in the body has titles of its own), its
// white space collapsed, at most 300 bytes. It is all webfetch reads of a
// body: the tokenizer is bounded (10,000 tokens), nothing is rendered.
func Title(page string) string {
	z := html.NewTokenizer(strings.NewReader(page))
	for range 10_000 {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken:
			name, _ := z.TagName()
			switch atom.Lookup(name) {
			case atom.Title:
				if z.Next() != html.TextToken {
					return ""
				}
				return cut(strings.Join(strings.Fields(string(z.Text())), " "), 300)
			case atom.Body:
				return ""
			}
		}
	}
	return ""
}

// cut cuts s to at most n bytes without splitting a character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
