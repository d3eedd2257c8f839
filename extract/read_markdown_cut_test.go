package extract

import (
	"bytes"
	"strings"
	"testing"
)

// Cutting a long block loses nothing: a short table header is repeated at
// the start of every part, and a header too long to repeat is kept once.
func TestCutMarkdownBlockKeepsEveryLineAndRepeatsAShortHeader(t *testing.T) {
	rows := strings.Repeat("| a row | of the table |\n", 40)
	short := "| a | b |\n|---|---|\n"
	parts := CutMarkdownBlock([]byte(short+rows), MarkdownCut{Part: 256, Fences: true})
	if len(parts) < 2 {
		t.Fatalf("%d parts, want several", len(parts))
	}
	var body []byte
	for _, p := range parts {
		if !bytes.HasPrefix(p, []byte(short)) || !bytes.HasSuffix(p, []byte("\n")) {
			t.Fatalf("a part does not start with the header and end a line: %q", p)
		}
		body = append(body, p[len(short):]...)
	}
	if string(body) != rows {
		t.Errorf("the parts do not hold the rows:\n%s", body)
	}

	long := "| " + strings.Repeat("h", 200) + " | b |\n|---|---|\n"
	parts = CutMarkdownBlock([]byte(long+rows), MarkdownCut{Part: 256, Fences: true})
	if got := string(bytes.Join(parts, nil)); got != long+rows {
		t.Errorf("with a header too long to repeat, the parts do not hold the block once:\n%s", got)
	}
}
