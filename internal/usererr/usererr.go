// Package usererr is the one way an error carries a message a user may
// see, separate from what is logged (after Miniflux's locale errors).
//
// An error that does not carry such a message — a database, file-system or
// network failure, a bug — is shown as a generic message and logged in
// full; its text never reaches a page. Code that writes an error for the
// user makes it with New or Wrap (or a type of its own with a UserMessage
// method, such as media's refusals); code that shows errors asks Message.
//
// It is a leaf package (standard library only) so that every part of Weft —
// db, chat, rag, media, agent, handlers — can use it without an import cycle.
package usererr

import (
	"errors"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Messager is implemented by errors whose UserMessage is written for the
// user: it names the problem and what to do, never a path, a query or an
// address inside the server.
type Messager interface {
	UserMessage() string
}

// Error is an error with a message for the user and, for the log, an
// optional cause.
type Error struct {
	msg   string
	cause error
}

// New is an error whose text is written for the user.
func New(msg string) error { return &Error{msg: msg} }

// Wrap is cause shown to the user as msg; the log gets both.
func Wrap(cause error, msg string) error { return &Error{msg: msg, cause: cause} }

// Error is the text for the log: the message, then the cause.
func (e *Error) Error() string {
	if e.cause == nil {
		return e.msg
	}
	return e.msg + ": " + e.cause.Error()
}

// UserMessage is the message for the user.
func (e *Error) UserMessage() string { return e.msg }

func (e *Error) Unwrap() error { return e.cause }

// Message is the user's message of the first error in err's chain that
// carries one; ok is false when none does (the caller then shows a generic
// message and logs err).
func Message(err error) (msg string, ok bool) {
	var m Messager
	if err == nil || !errors.As(err, &m) {
		return "", false
	}
	return m.UserMessage(), true
}

// Is reports whether err carries a message for the user.
func Is(err error) bool {
	_, ok := Message(err)
	return ok
}

// Or is err's message for the user, or generic when it carries none.
func Or(err error, generic string) string {
	if msg, ok := Message(err); ok {
		return msg
	}
	return generic
}

// Untrusted makes text that came from outside Weft (a model server's or a
// media server's error reply) fit to quote in a message: valid UTF-8, no
// control or direction-changing characters, on one line, at most max runes.
// It is still text, never markup: pages escape it like any other.
func Untrusted(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == utf8.RuneError, r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
			return -1
		case unicode.IsSpace(r):
			return ' '
		case !unicode.IsPrint(r):
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:max])) + "…"
}

// Capitalize makes a message that may have been written to follow a colon
// ("the file is empty") start a sentence: its first letter in upper case.
func Capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || r == utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// Size formats n bytes for a message, in KB, MB or GB (of 1024), with at
// most one decimal rounded up, so that a file just over a limit never
// reads as equal to it: 9.1 MB, 8 MB, 512 KB, 900 bytes, 1 GB.
func Size(n int64) string {
	const kb, mb, gb = 1 << 10, 1 << 20, 1 << 30
	switch {
	case n >= gb:
		return tenths(n, gb) + " GB"
	case n < kb:
		if n == 1 {
			return "1 byte"
		}
		return strconv.FormatInt(n, 10) + " bytes"
	case n < mb:
		return tenths(n, kb) + " KB"
	}
	return tenths(n, mb) + " MB"
}

// tenths is n/unit rounded up to one decimal, without a trailing ".0".
func tenths(n, unit int64) string {
	t := (n*10 + unit - 1) / unit
	if t%10 == 0 {
		return strconv.FormatInt(t/10, 10)
	}
	return strconv.FormatInt(t/10, 10) + "." + strconv.FormatInt(t%10, 10)
}
