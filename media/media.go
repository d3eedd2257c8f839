// Package media owns attachments — sniffing what a file really is, size
// limits, content-addressed blob storage, thumbnails and the text of
// documents — and generated media: text-to-speech and image generation.
//
// It never renders HTML and never reads HTTP requests: handlers hand it
// bytes and names, and show the messages of its refusals (errors wrapping
// ErrRefused), which are written for the user. Everything that parses a
// file a user sent, or a reply a media server sent, is bounded before it
// allocates: decompression bombs, oversized replies and scripts disguised
// as images are refused, never trusted.
package media

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"weft/extract"
	"weft/internal/usererr"
)

// ErrRefused is wrapped by every refusal of a file. The refusal's own
// message is safe to show to the user as is: it names the file's problem
// (and the file), never a path on the server or a Go internal.
var ErrRefused = errors.New("file refused")

// refusal is an error whose message is for the user; it wraps ErrRefused
// and, for logs, the cause.
type refusal struct {
	msg   string
	cause error
}

func (e *refusal) Error() string { return e.msg }

// UserMessage makes a refusal a usererr.Messager: its message is written
// for the user.
func (e *refusal) UserMessage() string { return e.msg }

func (e *refusal) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrRefused}
	}
	return []error{ErrRefused, e.cause}
}

// inFile names the file in an error about it: a refusal stays one (its
// message for the user leads with the name), anything else is wrapped for
// the log.
func inFile(name string, err error) error {
	var r *refusal
	if errors.As(err, &r) {
		return refuse(err, "%s: %s", name, r.msg)
	}
	return fmt.Errorf("%s: %w", name, err)
}

func refuse(cause error, format string, args ...any) error {
	return &refusal{msg: fmt.Sprintf(format, args...), cause: cause}
}

// displayName is a file name fit for a message: extract.CleanFileName's
// label, shortened in the middle to at most 80 characters so that both
// the start and the extension stay readable.
func displayName(name string) string {
	name = extract.CleanFileName(name, "the file")
	if utf8.RuneCountInString(name) > 80 {
		r := []rune(name)
		name = string(r[:40]) + "…" + string(r[len(r)-39:])
	}
	return name
}

// ReadableSize formats n bytes for people (see usererr.Size).
func ReadableSize(n int64) string { return usererr.Size(n) }

var readableSize = usererr.Size

// thousands formats n as 20,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
