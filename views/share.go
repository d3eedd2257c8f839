package views

import "regexp"

// citeLinkRe matches the citation links MarkdownWithCitations puts into an
// answer's rendering (after sanitizing: model text cannot forge them into
// anything but the same link).
var citeLinkRe = regexp.MustCompile(`<a class="cite" href="/m/\d+/sources/\d+" data-testid="citation" data-document-id="\d+">(\[\d+\])</a>`)

// SharedBodyHTML is an answer's stored rendering as a share link shows it:
// the same sanitized HTML with its citation links (into the owner's app,
// where a reader has no access) made plain markers.
func SharedBodyHTML(html string) string {
	return citeLinkRe.ReplaceAllString(html, `<span class="cite">$1</span>`)
}
