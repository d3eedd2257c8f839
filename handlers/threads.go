package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"weft/chat"
	"weft/db"
	"weft/views"
)

// pathPageSize is how many messages of the active path a thread page shows.
const pathPageSize = 100

type threadStore interface {
	Thread(ctx context.Context, user, id int64) (db.Thread, error)
	ActivePath(ctx context.Context, user, thread int64, limit int) ([]db.Message, bool, error)
	RenameThread(ctx context.Context, user, id int64, title string) error
	SetThreadPinned(ctx context.Context, user, id int64, pinned bool) error
	SetThreadArchived(ctx context.Context, user, id int64, archived bool) error
	DeleteThread(ctx context.Context, user, id int64) ([]string, error)
}

type sender interface {
	Send(ctx context.Context, user int64, in chat.Input) (chat.Sent, error)
}

// threads serves the thread page and the thread's actions.
type threads struct {
	store threadStore
	shell *shell
	chat  sender
}

func (h *threads) show(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	t, err := h.store.Thread(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	ws, err := h.shell.store.Workspace(r.Context(), u.ID, t.WorkspaceID)
	if err != nil {
		storeError(w, r, err)
		return
	}
	msgs, more, err := h.store.ActivePath(r.Context(), u.ID, t.ID, pathPageSize)
	if err != nil {
		serverError(w, r, err)
		return
	}
	s, err := h.shell.build(r.Context(), u, ws, t.ID, t.Title)
	if err != nil {
		serverError(w, r, err)
		return
	}
	p := views.ThreadPage{Thread: t, Messages: msgs, More: more, Composer: views.ComposerData{
		Action: fmt.Sprintf("/t/%d/messages", t.ID), WorkspaceID: ws.ID, Models: withModel(s.Models, t.Model), Model: t.Model,
	}}
	render(w, r, http.StatusOK, views.Page(threadTitleOr(t.Title), views.App(s, views.Thread(p))))
}

// create serves POST /t: the first message of a new thread.
func (h *threads) create(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	wsID, err := strconv.ParseInt(r.PostForm.Get("workspace_id"), 10, 64)
	if err != nil {
		badRequest(w, r, "Choose a workspace for the new thread.")
		return
	}
	h.send(w, r, chat.Input{WorkspaceID: wsID})
}

// append serves POST /t/{id}/messages.
func (h *threads) append(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	h.send(w, r, chat.Input{ThreadID: id})
}

func (h *threads) send(w http.ResponseWriter, r *http.Request, in chat.Input) {
	u, _ := currentUser(r)
	in.Content = r.PostForm.Get("content")
	in.Model = strings.TrimSpace(r.PostForm.Get("model"))
	if len(in.Model) > 200 {
		badRequest(w, r, "That model name is too long.")
		return
	}
	sent, err := h.chat.Send(r.Context(), u.ID, in)
	switch {
	case errors.Is(err, chat.ErrEmpty), errors.Is(err, chat.ErrTooLong):
		badRequest(w, r, "Message not sent: "+err.Error()+".")
		return
	case err != nil:
		storeError(w, r, err)
		return
	}
	if sent.Created {
		slog.InfoContext(r.Context(), "thread created", "thread", sent.ThreadID)
	}
	redirect(w, r, fmt.Sprintf("/t/%d#m%d", sent.ThreadID, sent.Message.ID))
}

func (h *threads) rename(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	title := strings.Join(strings.Fields(r.PostForm.Get("title")), " ")
	if title == "" || utf8.RuneCountInString(title) > 200 {
		badRequest(w, r, "A title needs 1 to 200 characters.")
		return
	}
	if err := h.store.RenameThread(r.Context(), u.ID, id, title); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d", id))
}

func (h *threads) pin(w http.ResponseWriter, r *http.Request) {
	h.toggle(w, r, "pinned", h.store.SetThreadPinned)
}

func (h *threads) archive(w http.ResponseWriter, r *http.Request) {
	h.toggle(w, r, "archived", h.store.SetThreadArchived)
}

// toggle handles the boolean thread actions (pin, archive).
func (h *threads) toggle(w http.ResponseWriter, r *http.Request, field string, set func(context.Context, int64, int64, bool) error) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	v, ok := formBool(r, field)
	if !ok {
		badRequest(w, r, "Say "+field+"=true or "+field+"=false.")
		return
	}
	if err := set(r.Context(), u.ID, id, v); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d", id))
}

// delete removes the thread with its messages, runs and files.
func (h *threads) delete(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	released, err := h.store.DeleteThread(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	slog.InfoContext(r.Context(), "thread deleted", "thread", id, "released_blobs", len(released))
	redirect(w, r, "/")
}

func withModel(models []string, m string) []string {
	if m == "" {
		return models
	}
	for _, x := range models {
		if x == m {
			return models
		}
	}
	return append([]string{m}, models...)
}

func threadTitleOr(t string) string {
	if t == "" {
		return "Untitled"
	}
	return t
}
