package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"weft/chat"
	"weft/db"
)

// clearStore is what /clear and its Undo need beyond threadStore (db.DB
// has it).
type clearStore interface {
	AddContextClear(ctx context.Context, user, after int64) (db.Message, error)
	UndoContextClear(ctx context.Context, user, id int64) (db.Message, error)
}

// temporaryStore is what /temporary needs (db.DB has it).
type temporaryStore interface {
	ThreadTemporary(ctx context.Context, user, thread int64) (bool, error)
	SetThreadTemporary(ctx context.Context, user, thread int64, temp bool) error
}

// cmdClear starts a new context segment after the thread's active leaf:
// the earlier turns stay in the thread, later requests on every route
// skip them (chat.Assemble). The marker shown there undoes it.
func (h *threads) cmdClear(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, t db.Thread) {
	cs, ok := h.store.(clearStore)
	if !ok {
		serverError(w, r, errors.New("the store cannot clear the context"))
		return
	}
	if t.ActiveLeafID == nil {
		h.refuse(w, r, in, "There is nothing to clear yet: the conversation is empty.")
		return
	}
	_, err := cs.AddContextClear(r.Context(), u.ID, *t.ActiveLeafID)
	switch {
	case errors.Is(err, db.ErrAlreadyCleared):
		h.refuse(w, r, in, "The context is already cleared here: the next message starts a new context.")
		return
	case err != nil:
		storeError(w, r, err)
		return
	}
	h.flashTo(w, r, in, "Context cleared. The earlier messages stay in the thread, but the model no longer receives them; Undo on the marker sends them again.")
}

// undoClear serves POST /clears/{id}/undo: the marker goes, and the turns
// before it are sent again.
func (h *threads) undoClear(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	cs, ok := h.store.(clearStore)
	if !ok {
		serverError(w, r, errors.New("the store cannot clear the context"))
		return
	}
	m, err := cs.UndoContextClear(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	if isHTMX(r) {
		// The marker is swapped for nothing.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		return
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, "The context clear was undone: the earlier messages are sent to the model again.")
	redirect(w, r, fmt.Sprintf("/t/%d", m.ThreadID))
}

// cmdTemporary is the thread's temporary switch as a command: /temporary
// makes the thread temporary (no memory read or written in it),
// /temporary off makes it use memory again.
func (h *threads) cmdTemporary(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, t db.Thread, arg string) {
	ts, ok := h.store.(temporaryStore)
	if !ok {
		serverError(w, r, errors.New("the store cannot mark threads temporary"))
		return
	}
	var temp bool
	switch strings.ToLower(arg) {
	case "", "on":
		temp = true
	case "off":
	default:
		h.refuse(w, r, in, "Write /temporary to make this thread temporary (no memory read or written), or /temporary off to use memory again.")
		return
	}
	was, err := ts.ThreadTemporary(r.Context(), u.ID, t.ID)
	if err != nil {
		storeError(w, r, err)
		return
	}
	if err := ts.SetThreadTemporary(r.Context(), u.ID, t.ID, temp); err != nil {
		storeError(w, r, err)
		return
	}
	msg := "This thread is now temporary: your memories are neither read nor written in it. /temporary off ends it."
	switch {
	case temp && was:
		msg = "This thread is already temporary: your memories are neither read nor written in it. /temporary off ends it."
	case !temp && was:
		msg = "This thread is no longer temporary: it reads and writes your memories again."
	case !temp:
		msg = "This thread is not temporary: it reads and writes your memories."
	}
	h.flashTo(w, r, in, msg)
}
