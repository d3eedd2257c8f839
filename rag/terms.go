package rag

import (
	"regexp"
	"strings"
)

// What full-text search sees of a chunk beyond its words: the document's
// title (contextual chunks) and the identifiers of its text kept whole.

// maxIdents caps the identifiers kept whole per chunk (or question): a
// chunk of 1,500 characters rarely holds more than a few dozen.
const maxIdents = 200

// identRE matches identifier-like tokens: word characters joined by dots or
// underscores (os.path.join, max_connections, __init__, x86_64).
var identRE = regexp.MustCompile(`[\p{L}\p{N}_]+(?:[._][\p{L}\p{N}_]+)*`)

// Identifiers returns the identifiers of s that PostgreSQL's parser would
// split or keep only whole — those holding an underscore or a dot between
// word characters — lower-cased, each once, as lexemes to add as they are.
// Together with the parser's own words (kb_search_text splits dotted
// names into their parts), max_connections is found both as itself and as
// "max" and "connections", os.path.join as itself and as "join".
func Identifiers(s string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range identRE.FindAllString(s, -1) {
		m = strings.Trim(m, ".")
		if len(m) > 64 || !strings.ContainsAny(strings.Trim(m, "_"), "._") || !hasLetter(m) {
			continue
		}
		m = strings.ToLower(m)
		if seen[m] {
			continue
		}
		seen[m] = true
		if out = append(out, m); len(out) == maxIdents {
			break
		}
	}
	return out
}

func hasLetter(s string) bool {
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 127 {
			return true
		}
	}
	return false
}

// extRE is the extension of a document format Weft reads, as the
// migration that introduced titles strips it (012_ranking.sql). Only
// those: a page added from the web is named by its title, which may end in
// "3.11" or "os.path".
var extRE = regexp.MustCompile(`(?i)\.(html?|xhtml|md|markdown|txt|text|pdf|docx|csv|tsv|rst)$`)

// DocTitle is the title a document's chunks carry: its name without its
// extension ("os.path.html" → "os.path", "Q3 report.pdf" → "Q3 report").
func DocTitle(name string) string {
	return extRE.ReplaceAllString(name, "")
}

// EmbedText is what is embedded for a chunk: its document's title and its
// heading path, then its text. A heading equal to the title is not
// repeated.
func EmbedText(title string, headings []string, text string) string {
	var ctx []string
	if title != "" {
		ctx = append(ctx, title)
	}
	for _, h := range headings {
		if h != title {
			ctx = append(ctx, h)
		}
	}
	if len(ctx) == 0 {
		return text
	}
	return strings.Join(ctx, " › ") + "\n\n" + text
}
