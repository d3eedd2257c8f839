package extract

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCleanFileNameKeepsOnlyASafeLabel(t *testing.T) {
	long := strings.Repeat("é", 300) + ".txt"
	for _, c := range []struct{ in, want string }{
		{"report.pdf", "report.pdf"},
		{"../../etc/passwd", "passwd"},
		{"/abs/path/notes.md", "notes.md"},
		{`C:\Users\ann\Desktop\plan.docx`, "plan.docx"},
		{`..\..\windows\win.ini`, "win.ini"},
		{"..", "fallback"},
		{"...", "fallback"},
		{".", "fallback"},
		{"/", "fallback"},
		{"dir/", "dir"},
		{"", "fallback"},
		{"   ", "fallback"},
		{"a\x00b.txt", "ab.txt"},
		{"line\nbreak\r.txt", "linebreak.txt"},
		{"c1\u0085\u009b.txt", "c1.txt"},
		{"invoice\u202etxt.exe", "invoicetxt.exe"},
		{"\u2066iso\u2069\u200f.txt", "iso.txt"},
		{"bad\xffutf8.txt", "badutf8.txt"},
		{"  padded.txt  ", "padded.txt"},
		{"\x00\u202e", "fallback"},
		{".hidden", ".hidden"},
		{"résumé 😀.md", "résumé 😀.md"},
		{long, strings.Repeat("é", 200)},
	} {
		got := CleanFileName(c.in, "fallback")
		if got != c.want {
			t.Errorf("CleanFileName(%q) = %q, want %q", c.in, got, c.want)
		}
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) > MaxFileNameRunes {
			t.Errorf("CleanFileName(%q) = %q: not valid UTF-8 of at most %d runes", c.in, got, MaxFileNameRunes)
		}
	}
}
