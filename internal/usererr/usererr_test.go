package usererr_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"weft/internal/usererr"
)

func TestOnlyErrorsThatCarryAMessageShowOneAndTheLogKeepsTheCause(t *testing.T) {
	cause := errors.New(`pq: relation "secret" does not exist`)
	wrapped := fmt.Errorf("load thread: %w", usererr.Wrap(cause, "The thread could not be loaded."))
	for _, tc := range []struct {
		err  error
		want string
		ok   bool
	}{
		{usererr.New("The message is empty."), "The message is empty.", true},
		{wrapped, "The thread could not be loaded.", true},
		{cause, "", false},
		{fmt.Errorf("send: %w", cause), "", false},
		{nil, "", false},
	} {
		got, ok := usererr.Message(tc.err)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Message(%v) = %q, %v; want %q, %v", tc.err, got, ok, tc.want, tc.ok)
		}
	}
	if !errors.Is(wrapped, cause) || !strings.Contains(wrapped.Error(), "secret") {
		t.Errorf("the log loses the cause: %v", wrapped)
	}
	if got := usererr.Or(cause, "Something went wrong."); got != "Something went wrong." {
		t.Errorf("Or = %q", got)
	}
}

func TestUntrustedTextIsOneCleanCappedLine(t *testing.T) {
	got := usererr.Untrusted("bad\x00 model\n\tname \u202eevil\xff"+strings.Repeat("x", 500), 40)
	if strings.ContainsAny(got, "\x00\n\t\u202e\xff") || len([]rune(got)) > 41 || !strings.HasPrefix(got, "bad model name evil") || !strings.HasSuffix(got, "…") {
		t.Errorf("Untrusted = %q", got)
	}
}

func TestCapitalizeStartsASentenceWithAnUpperCaseLetter(t *testing.T) {
	for in, want := range map[string]string{
		"the file is empty": "The file is empty",
		"Already":           "Already",
		"élan":              "Élan",
		"":                  "",
		"42 files":          "42 files",
	} {
		if got := usererr.Capitalize(in); got != want {
			t.Errorf("Capitalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSizesReadForPeopleAndRoundUp(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 bytes", 1: "1 byte", 1023: "1023 bytes", 1024: "1 KB", 1536: "1.5 KB", 1025: "1.1 KB",
		8 << 20: "8 MB", 9_542_000: "9.1 MB", 50 << 20: "50 MB", 3 << 30: "3 GB",
	} {
		if got := usererr.Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
