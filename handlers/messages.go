package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"weft/chat"
	"weft/db"
	"weft/internal/usererr"
)

type messageStore interface {
	SelectBranch(ctx context.Context, user, message int64) (int64, error)
	ForkThread(ctx context.Context, user, message int64) (db.Thread, error)
}

// messages serves the actions on one message of the tree: retry and
// regenerate, edit, continue, switch branch, fork and delete. Every action
// adds to the tree or moves the visible branch; nothing is overwritten.
type messages struct {
	media attacher
	store messageStore
	rt    runtime
}

// retry serves POST /m/{id}/retry (also "regenerate", optionally with a
// model): a new sibling answer.
func (h *messages) retry(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	u, _ := currentUser(r)
	model := strings.TrimSpace(r.PostForm.Get("model"))
	if len(model) > 200 {
		badRequest(w, r, "That model name is too long.")
		return
	}
	h.afterSend(w, r)(h.rt.Retry(r.Context(), u.ID, id, model))
}

// edit serves POST /m/{id}/edit: a new version of a user message, answered.
func (h *messages) edit(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	u, _ := currentUser(r)
	h.afterSend(w, r)(h.rt.Edit(r.Context(), u.ID, id, r.PostForm.Get("content")))
}

// continueAnswer serves POST /m/{id}/continue.
func (h *messages) continueAnswer(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	u, _ := currentUser(r)
	h.afterSend(w, r)(h.rt.Continue(r.Context(), u.ID, id))
}

// afterSend answers an action that queued a run: back to the thread, at the
// new answer; refusals get a clear message.
func (h *messages) afterSend(w http.ResponseWriter, r *http.Request) func(db.Sent, error) {
	return func(sent db.Sent, err error) {
		switch {
		case errors.Is(err, chat.ErrEmpty), errors.Is(err, chat.ErrTooLong):
			badRequest(w, r, "Not sent: "+usererr.Or(err, "the message could not be read")+".")
		case errors.Is(err, db.ErrNotRetryable):
			badRequest(w, r, "This message cannot be answered again.")
		case errors.Is(err, db.ErrNotEditable):
			badRequest(w, r, "Only your own messages can be edited.")
		case errors.Is(err, db.ErrNotContinuable):
			badRequest(w, r, "Only a stopped or interrupted answer with nothing after it can be continued.")
		case err != nil:
			storeError(w, r, err)
		default:
			redirect(w, r, fmt.Sprintf("/t/%d#m%d", sent.Thread.ID, sent.Assistant.ID))
		}
	}
}

// selectBranch serves POST /m/{id}/select: show the branch this message
// starts (sibling navigation). The choice is saved on the thread, so a
// reload and other tabs show the same branch.
func (h *messages) selectBranch(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	u, _ := currentUser(r)
	thread, err := leaveBranch(r.Context(), h.store, h.rt, u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d#m%d", thread, id))
}

// fork serves POST /m/{id}/fork: a new thread holding the path up to here.
func (h *messages) fork(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	u, _ := currentUser(r)
	t, err := h.store.ForkThread(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d", t.ID))
}

// delete serves POST /m/{id}/delete: the message and everything below it.
func (h *messages) delete(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	u, _ := currentUser(r)
	del, err := h.rt.DeleteMessage(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	slog.InfoContext(r.Context(), "messages deleted", "thread", del.ThreadID, "count", del.Messages,
		"stopped_runs", len(del.ActiveRuns), "released_blobs", len(del.Released))
	if h.media != nil {
		h.media.Release(r.Context(), del.Released)
	}
	redirect(w, r, fmt.Sprintf("/t/%d", del.ThreadID))
}
