package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"weft/db"
)

// ExportVersion is the version of the JSON export format.
const ExportVersion = 1

// Import limits.
const (
	MaxImportBytes    = 20 << 20
	MaxImportMessages = 50_000
)

// exportFile is the JSON export of a whole thread tree. Message ids are
// only meaningful inside the file; parents always come before children.
type exportFile struct {
	Format     string          `json:"format"`
	Version    int             `json:"version"`
	Title      string          `json:"title"`
	Model      string          `json:"model"`
	Notes      string          `json:"notes,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	ActiveLeaf *int64          `json:"active_leaf"`
	Messages   []exportMessage `json:"messages"`
}

type exportMessage struct {
	ID        int64           `json:"id"`
	Parent    *int64          `json:"parent"`
	Role      string          `json:"role"`
	Content   string          `json:"content"`
	Status    string          `json:"status"`
	Error     string          `json:"error,omitempty"`
	Parts     json.RawMessage `json:"parts,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
}

// ExportJSON writes a thread's whole tree (every branch) as JSON.
func ExportJSON(w io.Writer, t db.Thread, msgs []db.Message) error {
	f := exportFile{Format: "weft-thread", Version: ExportVersion, Title: t.Title, Model: t.Model,
		Notes: t.Notes, CreatedAt: t.CreatedAt, ActiveLeaf: t.ActiveLeafID, Messages: make([]exportMessage, len(msgs))}
	for i, m := range msgs {
		f.Messages[i] = exportMessage{ID: m.ID, Parent: m.ParentID, Role: m.Role, Content: m.Content, Status: m.Status,
			Error: m.Error, Parts: m.Parts, Metadata: m.Metadata.Raw, CreatedAt: m.CreatedAt}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(f)
}

// ExportMarkdown writes the visible conversation (the active path) as
// Markdown.
func ExportMarkdown(w io.Writer, t db.Thread, path []db.Message) error {
	title := t.Title
	if title == "" {
		title = "Untitled"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", title)
	if t.Model != "" {
		fmt.Fprintf(&b, "_Model: %s · exported from Weft on %s_\n\n", t.Model, time.Now().UTC().Format("2006-01-02"))
	}
	for _, m := range path {
		who := map[string]string{"user": "You", "assistant": "Assistant", "system": "System", "tool": "Tool"}[m.Role]
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", who, strings.TrimSpace(m.Content))
		if m.Status != db.MsgComplete {
			fmt.Fprintf(&b, "_(%s)_\n\n", m.Status)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ErrBadImport wraps every reason an import file is refused.
var ErrBadImport = errors.New("not a Weft thread export")

// badImport is a refused import file; its message (ErrBadImport's text and
// what is wrong) is for the user.
type badImport struct {
	detail string
	cause  error // for the log only
}

func badImportf(format string, args ...any) error {
	return &badImport{detail: fmt.Sprintf(format, args...)}
}

// notJSON refuses a file the decoder could not read: the decoder's own
// words when they are about the JSON, generic ones otherwise (a read
// error may name a temporary file of the server).
func notJSON(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &badImport{detail: fmt.Sprintf("the file is not valid JSON (%v)", err), cause: err}
	}
	return &badImport{detail: "the file could not be read as JSON", cause: err}
}

func (e *badImport) Error() string { return ErrBadImport.Error() + ": " + e.detail }

// UserMessage makes a refused import a usererr.Messager.
func (e *badImport) UserMessage() string { return e.Error() }

func (e *badImport) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrBadImport}
	}
	return []error{ErrBadImport, e.cause}
}

// ParseImport reads and checks a JSON export. Anything wrong is refused
// with a message saying what, before anything is stored.
func ParseImport(r io.Reader) (db.ImportedThread, error) {
	var f exportFile
	dec := json.NewDecoder(io.LimitReader(r, MaxImportBytes+1))
	if err := dec.Decode(&f); err != nil {
		return db.ImportedThread{}, notJSON(err)
	}
	if f.Format != "weft-thread" || f.Version != ExportVersion {
		return db.ImportedThread{}, badImportf("expected format \"weft-thread\" version %d", ExportVersion)
	}
	if len(f.Messages) == 0 {
		return db.ImportedThread{}, badImportf("it has no messages")
	}
	if len(f.Messages) > MaxImportMessages {
		return db.ImportedThread{}, badImportf("more than %d messages", MaxImportMessages)
	}
	out := db.ImportedThread{Title: clip(f.Title, 200), Model: clip(f.Model, 200), Notes: f.Notes, ActiveLeaf: -1}
	index := make(map[int64]int, len(f.Messages))
	for i, m := range f.Messages {
		if _, dup := index[m.ID]; dup {
			return db.ImportedThread{}, badImportf("message id %d appears twice", m.ID)
		}
		parent := -1
		if m.Parent != nil {
			p, ok := index[*m.Parent]
			if !ok {
				return db.ImportedThread{}, badImportf("message %d names parent %d, which does not come before it", m.ID, *m.Parent)
			}
			parent = p
		}
		switch m.Role {
		case "user", "assistant", "system", "tool":
		default:
			return db.ImportedThread{}, badImportf("message %d has unknown role %q", m.ID, m.Role)
		}
		status := m.Status
		switch status {
		case db.MsgComplete, db.MsgError, db.MsgCancelled, db.MsgInterrupted:
		case db.MsgStreaming:
			status = db.MsgInterrupted // nothing is writing it any more
		case "":
			status = db.MsgComplete
		default:
			return db.ImportedThread{}, badImportf("message %d has unknown status %q", m.ID, m.Status)
		}
		if !utf8.ValidString(m.Content) || utf8.RuneCountInString(m.Content) > 1_000_000 {
			return db.ImportedThread{}, badImportf("message %d has text that is not UTF-8 or too long", m.ID)
		}
		for _, raw := range []json.RawMessage{m.Parts, m.Metadata} {
			if len(raw) > 0 && !json.Valid(raw) {
				return db.ImportedThread{}, badImportf("message %d has malformed parts or metadata", m.ID)
			}
		}
		if len(m.Metadata) > 0 && !strings.HasPrefix(strings.TrimSpace(string(m.Metadata)), "{") {
			return db.ImportedThread{}, badImportf("message %d has metadata that is not an object", m.ID)
		}
		if len(m.Parts) > 0 && !strings.HasPrefix(strings.TrimSpace(string(m.Parts)), "[") {
			return db.ImportedThread{}, badImportf("message %d has parts that are not a list", m.ID)
		}
		index[m.ID] = i
		out.Messages = append(out.Messages, db.ImportedMessage{Parent: parent, Role: m.Role, Content: m.Content,
			Parts: m.Parts, Metadata: m.Metadata, Status: status, Error: m.Error, CreatedAt: m.CreatedAt})
	}
	if f.ActiveLeaf != nil {
		i, ok := index[*f.ActiveLeaf]
		if !ok {
			return db.ImportedThread{}, badImportf("the active message %d is not in the file", *f.ActiveLeaf)
		}
		out.ActiveLeaf = i
	}
	return out, nil
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
