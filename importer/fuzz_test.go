package importer

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse: any file is recognised or refused by Detect, and read by the
// Scanner into conversations each of which either is skipped with a reason
// or maps, in both formats, onto a tree ImportThread can store as it is:
// parents before children (so no cycle), user and assistant messages only,
// valid UTF-8 without NUL within the limits, an active leaf inside it. The
// scan always ends. Seeds (testdata/fuzz/FuzzParse, from go run
// ./internal/fuzzseeds): the hand-written fixtures, deep nesting, loops of
// parent links, wrong types, invalid UTF-8, NULs, long strings, truncated
// files.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`[{"title":"t","mapping":{"a":{"id":"a","message":{"author":{"role":"user"},"content":{"parts":["hi"]}}}}}]`))
	lim := Limits{MaxConversationBytes: 64 << 10, MaxMessages: 200, MaxDepth: 32, MaxMessageRunes: 1000, MaxTitleRunes: 50}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := Detect(data); err != nil && !errors.Is(err, ErrUnknownFormat) && !errors.Is(err, ErrEmpty) {
			t.Fatalf("Detect: %v", err)
		}
		sc := NewScanner(bytes.NewReader(data), lim)
		for n := 0; ; n++ {
			if n > len(data)+1 {
				t.Fatal("the scan does not end")
			}
			raw, err := sc.Next()
			if err == io.EOF {
				return
			}
			var se *SkipError
			var be *BrokenError
			switch {
			case errors.As(err, &be):
				return
			case errors.As(err, &se):
				continue
			case err != nil:
				t.Fatalf("Next: %v", err)
			}
			if len(raw) > lim.MaxConversationBytes {
				t.Fatalf("a conversation of %d bytes was returned", len(raw))
			}
			for _, parse := range []func([]byte, Limits) (Conversation, error){ParseChatGPT, ParseOpenWebUI} {
				c, err := parse(raw, lim)
				if err != nil {
					if !errors.As(err, &se) {
						t.Fatalf("refused without a SkipError: %v", err)
					}
					continue
				}
				check(t, c, lim)
			}
		}
	})
}

func check(t *testing.T, c Conversation, lim Limits) {
	t.Helper()
	th := c.Thread
	if len(th.Messages) == 0 || len(th.Messages) > lim.MaxMessages {
		t.Fatalf("%d messages accepted", len(th.Messages))
	}
	if th.ActiveLeaf < -1 || th.ActiveLeaf >= len(th.Messages) {
		t.Fatalf("active leaf %d of %d", th.ActiveLeaf, len(th.Messages))
	}
	okText := func(s string, max int) bool {
		return utf8.ValidString(s) && !strings.ContainsRune(s, 0) && utf8.RuneCountInString(s) <= max
	}
	if th.Title == "" || !okText(th.Title, lim.MaxTitleRunes) {
		t.Fatalf("title %q", th.Title)
	}
	for i, m := range th.Messages {
		if m.Parent < -1 || m.Parent >= i {
			t.Fatalf("message %d has parent %d", i, m.Parent)
		}
		if m.Role != "user" && m.Role != "assistant" {
			t.Fatalf("role %q", m.Role)
		}
		if !okText(m.Content, lim.MaxMessageRunes+100) || !okText(m.Error, 2000) {
			t.Fatalf("message %d's text is not storable", i)
		}
		if bytes.Contains(m.Metadata, []byte(`\u0000`)) || !utf8.Valid(m.Metadata) {
			t.Fatalf("metadata %q", m.Metadata)
		}
	}
}
