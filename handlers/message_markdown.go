package handlers

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"weft/db"
)

type messageReader interface {
	Message(ctx context.Context, user, id int64) (db.Message, error)
	RoomMessageForMember(ctx context.Context, user, id int64) (db.Message, error)
}

// messageMarkdown serves GET /m/{id}/markdown: one of the user's messages as
// the markdown it was written in, for the copy button of every message
// (static/copy.js), or a message of a room the user is a member of (the
// room's thread is its owner's; hideRoomThreads lets this route through
// like a citation). Plain text, never rendered, never cached; line ends are
// "\n" (a browser sends a form's text with "\r\n", and so it is stored).
type messageMarkdown struct {
	store messageReader
}

func (h *messageMarkdown) show(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	u, _ := currentUser(r)
	m, err := h.store.Message(r.Context(), u.ID, id)
	if errors.Is(err, db.ErrNotFound) {
		m, err = h.store.RoomMessageForMember(r.Context(), u.ID, id)
	}
	if err != nil {
		storeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, strings.ReplaceAll(m.Content, "\r\n", "\n"))
}
