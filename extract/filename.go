package extract

import (
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxFileNameRunes is the longest file name CleanFileName keeps.
const MaxFileNameRunes = 200

// CleanFileName is the one cleaner of a file name a user (or a remote
// server) sent: what is left is only ever shown and stored as a label,
// never used as a path, but a hostile name must not reach a page, a log
// or a message in a form that misleads. It keeps the last element of a
// slash or backslash (Windows) path; drops invalid UTF-8, control
// characters (C0, DEL, C1) and the bidirectional controls that can make
// "exe.txt" display as "txt.exe" (U+202E and its kin); trims spaces;
// cuts to MaxFileNameRunes runes, so at a UTF-8 boundary. A name with
// nothing left, or only dots ("..", "..."), becomes fallback.
func CleanFileName(name, fallback string) string {
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || isBidiControl(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(name, ""))
	name = path.Base(strings.ReplaceAll(name, `\`, "/"))
	name = strings.TrimSpace(name)
	if utf8.RuneCountInString(name) > MaxFileNameRunes {
		name = strings.TrimSpace(string([]rune(name)[:MaxFileNameRunes]))
	}
	if strings.Trim(name, ".") == "" || name == "/" {
		return fallback
	}
	return name
}

// isBidiControl reports the explicit direction marks, embeddings,
// overrides and isolates of Unicode's bidirectional algorithm.
func isBidiControl(r rune) bool {
	switch {
	case r == '\u061c', r == '\u200e', r == '\u200f':
		return true
	case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}
