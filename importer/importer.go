// Package importer brings conversations exported from other apps into
// Weft: ChatGPT's data export (conversations.json) and Open WebUI's chat
// export. It owns recognising such a file, reading it one conversation at a
// time with every size, count and depth capped, mapping each conversation
// onto Weft's message tree (branches kept), and the background job that
// does it with progress and a report. Weft's own thread export stays with
// chat.ParseImport; the handler sends it there when Detect says so.
//
// It is a package of its own (not part of chat) because it reads large,
// untrusted files in a job and needs nothing of the conversation runtime.
// It must never trust a file: anything it cannot map is skipped with a
// reason, never stored half-way (each conversation is one transaction),
// and the tree is walked iteratively, so a deep or looping file costs
// memory and time in proportion to its size.
package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"

	"weft/db"
)

// File formats Detect recognises.
const (
	FormatWeft      = "weft"      // Weft's own thread export (chat.ParseImport)
	FormatChatGPT   = "chatgpt"   // ChatGPT's conversations.json
	FormatOpenWebUI = "openwebui" // Open WebUI's chat export
)

// Limits bound what one import may hold. The zero value of a field means
// its default.
type Limits struct {
	MaxBytes             int64 // the uploaded file (WEFT_IMPORT_MAX_BYTES), default 256 MiB
	MaxConversations     int   // conversations in one file, default 100,000
	MaxConversationBytes int   // one conversation's JSON, default 32 MiB
	MaxMessages          int   // nodes of one conversation, default 20,000
	MaxDepth             int   // JSON nesting inside one conversation, default 64
	MaxMessageRunes      int   // one message's text, default 1,000,000 (longer is cut, with a note)
	MaxTitleRunes        int   // a title, default 200 (longer is cut)
	// AttemptTime is how long one attempt of the job imports before it
	// hands over to the next (default 2 min; tests make it short).
	AttemptTime time.Duration
}

// DefaultMaxBytes is the default cap of an uploaded export.
const DefaultMaxBytes = 256 << 20

// WithDefaults fills the unset limits.
func (l Limits) WithDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	def(&l.MaxConversations, 100_000)
	def(&l.MaxConversationBytes, 32<<20)
	def(&l.MaxMessages, 20_000)
	def(&l.MaxDepth, 64)
	def(&l.MaxMessageRunes, 1_000_000)
	def(&l.MaxTitleRunes, 200)
	return l
}

// DetectBytes is how much of a file Detect needs at most.
const DetectBytes = 1 << 20

// ErrUnknownFormat refuses a file Detect does not recognise; its text is
// for the user.
var ErrUnknownFormat = errors.New("this file is not an export Weft can import: choose a Weft thread export (.json), " +
	"ChatGPT's conversations.json or an Open WebUI chat export (.json)")

// ErrEmpty refuses an export with no conversations.
var ErrEmpty = errors.New("this export holds no conversations")

// Detect tells the format of an export from its first bytes (at most
// DetectBytes): Weft's thread export is an object with "format":
// "weft-thread"; ChatGPT's is a list of objects with a "mapping"; Open
// WebUI's a list of objects with a "chat" (a single conversation of either,
// not in a list, is accepted too).
func Detect(prefix []byte) (string, error) {
	if len(prefix) > DetectBytes {
		prefix = prefix[:DetectBytes]
	}
	prefix = bytes.TrimPrefix(prefix, []byte("\xef\xbb\xbf"))
	dec := json.NewDecoder(bytes.NewReader(prefix))
	tok, err := dec.Token()
	if err != nil {
		return "", ErrUnknownFormat
	}
	switch tok {
	case json.Delim('['):
		tok, err = dec.Token()
		if err != nil {
			return "", ErrUnknownFormat
		}
		if tok == json.Delim(']') {
			return "", ErrEmpty
		}
		if tok != json.Delim('{') {
			return "", ErrUnknownFormat
		}
		f := objectFormat(dec)
		if f == "" || f == FormatWeft {
			return "", ErrUnknownFormat
		}
		return f, nil
	case json.Delim('{'):
		if f := objectFormat(dec); f != "" {
			return f, nil
		}
	}
	return "", ErrUnknownFormat
}

// objectFormat reads the keys of the object just opened until one tells
// its format ("" when none does within the prefix).
func objectFormat(dec *json.Decoder) string {
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		key, _ := tok.(string)
		switch key {
		case "mapping":
			return FormatChatGPT
		case "chat":
			return FormatOpenWebUI
		case "format":
			var v string
			if dec.Decode(&v) == nil && v == "weft-thread" {
				return FormatWeft
			}
			continue
		}
		if skipValue(dec) != nil {
			return ""
		}
	}
	return ""
}

// skipValue skips one value, token by token (no recursion).
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth <= 0 {
			return nil
		}
	}
}

// Conversation is one conversation mapped onto Weft's tree, with what was
// left out of it.
type Conversation struct {
	Thread          db.ImportedThread
	MessagesSkipped int      // hidden, system, tool, empty or looping nodes
	PartsSkipped    int      // images, files, audio… left out (a note in the text says where)
	Notes           []string // what was left out, for the report
}

// SkipError is a conversation that could not be imported; its message says
// why, for the report.
type SkipError struct{ Reason string }

func (e *SkipError) Error() string { return e.Reason }

func skip(reason string) error { return &SkipError{Reason: reason} }
