// Package chat is the conversation runtime shared by every route: it accepts
// a user's message, decides where it goes in the thread's tree and (with the
// model answers that come later) runs the route that answers it. It stores
// everything through db and never renders HTML or reads HTTP requests.
package chat

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"weft/db"
)

// MaxMessageRunes caps one message's text.
const MaxMessageRunes = 100_000

// ErrEmpty and ErrTooLong reject a message before anything is stored.
var (
	ErrEmpty   = errors.New("the message is empty")
	ErrTooLong = errors.New("the message is longer than 100,000 characters")
)

// Store is what the runtime needs from the database.
type Store interface {
	CreateThread(ctx context.Context, user int64, nt db.NewThread) (db.Thread, db.Message, error)
	AppendUserMessage(ctx context.Context, user, thread int64, content string) (db.Message, error)
}

// Service accepts messages.
type Service struct {
	store Store
}

// New returns a Service over store.
func New(store Store) *Service { return &Service{store: store} }

// Input is one send from the composer.
type Input struct {
	WorkspaceID int64 // for a new thread
	ThreadID    int64 // 0: the message starts a new thread
	Content     string
	Model       string
}

// Sent is the result of a send.
type Sent struct {
	ThreadID int64
	Message  db.Message
	Created  bool // the message created its thread
}

// Send validates and stores a user message. A new thread comes into being
// with its first message, in the same transaction, never before.
func (s *Service) Send(ctx context.Context, user int64, in Input) (Sent, error) {
	content := strings.TrimSpace(in.Content)
	if content == "" {
		return Sent{}, ErrEmpty
	}
	if utf8.RuneCountInString(content) > MaxMessageRunes {
		return Sent{}, ErrTooLong
	}
	if in.ThreadID != 0 {
		m, err := s.store.AppendUserMessage(ctx, user, in.ThreadID, content)
		return Sent{ThreadID: in.ThreadID, Message: m}, err
	}
	t, m, err := s.store.CreateThread(ctx, user, db.NewThread{
		WorkspaceID: in.WorkspaceID,
		Title:       provisionalTitle(content),
		Model:       in.Model,
		Content:     content,
	})
	return Sent{ThreadID: t.ID, Message: m, Created: true}, err
}

// provisionalTitle is the first line of the first message, shortened; a
// generated title replaces it once the model has answered.
func provisionalTitle(content string) string {
	line, _, _ := strings.Cut(content, "\n")
	line = strings.Join(strings.Fields(line), " ")
	const max = 60
	if utf8.RuneCountInString(line) <= max {
		return line
	}
	r := []rune(line)
	return strings.TrimSpace(string(r[:max-1])) + "…"
}
