package chat

import (
	"bytes"
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzImport: any file is either refused with an ErrBadImport or parsed
// into a thread that ImportThread can store as it is: a forest whose
// parents come before their children (so no cycle), known roles and
// statuses, valid UTF-8 text within the limits, an active leaf inside it.
// Seeds (testdata/fuzz/FuzzImport, from go run ./internal/fuzzseeds): deep
// nesting, huge arrays, invalid UTF-8, parent cycles, duplicate ids and
// 1 M-character messages.
func FuzzImport(f *testing.F) {
	f.Add([]byte(`{"format":"weft-thread","version":1,"messages":[{"id":1,"role":"user","content":"hi"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := ParseImport(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrBadImport) {
				t.Fatalf("refused without ErrBadImport: %v", err)
			}
			return
		}
		if len(in.Messages) == 0 || len(in.Messages) > MaxImportMessages {
			t.Fatalf("%d messages accepted", len(in.Messages))
		}
		if in.ActiveLeaf < -1 || in.ActiveLeaf >= len(in.Messages) {
			t.Fatalf("active leaf %d of %d messages", in.ActiveLeaf, len(in.Messages))
		}
		if utf8.RuneCountInString(in.Title) > 200 || utf8.RuneCountInString(in.Model) > 200 {
			t.Fatalf("title or model too long")
		}
		for i, m := range in.Messages {
			if m.Parent < -1 || m.Parent >= i {
				t.Fatalf("message %d has parent %d: not before it", i, m.Parent)
			}
			switch m.Role {
			case "user", "assistant", "system", "tool":
			default:
				t.Fatalf("role %q accepted", m.Role)
			}
			switch m.Status {
			case "complete", "error", "cancelled", "interrupted":
			default:
				t.Fatalf("status %q accepted", m.Status)
			}
			if !utf8.ValidString(m.Content) || utf8.RuneCountInString(m.Content) > 1_000_000 {
				t.Fatalf("message %d: text not UTF-8 or too long", i)
			}
		}
	})
}
