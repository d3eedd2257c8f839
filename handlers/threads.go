package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a-h/templ"

	"weft/chat"
	"weft/db"
	"weft/views"
)

// pathPageSize is how many messages of the active path a thread page shows.
const pathPageSize = 100

type threadStore interface {
	Thread(ctx context.Context, user, id int64) (db.Thread, error)
	ActivePath(ctx context.Context, user, thread int64, limit int) ([]db.Message, bool, error)
	ActiveRuns(ctx context.Context, user, thread int64) ([]db.Run, error)
	RenameThread(ctx context.Context, user, id int64, title string) error
	SetThreadPinned(ctx context.Context, user, id int64, pinned bool) error
	SetThreadArchived(ctx context.Context, user, id int64, archived bool) error
	DeleteThread(ctx context.Context, user, id int64) ([]string, error)
}

// threads serves the thread page and the thread's actions.
type threads struct {
	store threadStore
	shell *shell
	rt    runtime
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
	active, err := h.store.ActiveRuns(r.Context(), u.ID, t.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	s, err := h.shell.build(r.Context(), u, ws, t.ID, t.Title)
	if err != nil {
		serverError(w, r, err)
		return
	}
	p := views.ThreadPage{Thread: t, Messages: messageViews(msgs, active), More: more, Composer: views.ComposerData{
		Action: fmt.Sprintf("/t/%d/messages", t.ID), WorkspaceID: ws.ID, Models: s.Models, Model: t.Model, Append: true,
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
	sent, err := h.rt.Send(r.Context(), u.ID, in)
	switch {
	case errors.Is(err, chat.ErrEmpty), errors.Is(err, chat.ErrTooLong):
		badRequest(w, r, "Message not sent: "+err.Error()+".")
		return
	case err != nil:
		storeError(w, r, err)
		return
	}
	if sent.Created {
		slog.InfoContext(r.Context(), "thread created", "thread", sent.Thread.ID)
	}
	if isHTMX(r) && !sent.Created {
		// The composer appends the user message and the answer placeholder.
		run := sent.Run
		render(w, r, http.StatusOK, templ.Join(
			views.MessageItem(views.MessageView{Message: sent.User}),
			views.MessageItem(views.MessageView{Message: sent.Assistant, Run: &run}),
		))
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d#m%d", sent.Thread.ID, sent.Assistant.ID))
}

// retry serves POST /m/{id}/retry: answer again, as a new sibling.
func (h *threads) retry(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	sent, err := h.rt.Retry(r.Context(), u.ID, id)
	if errors.Is(err, db.ErrNotRetryable) {
		badRequest(w, r, "This message cannot be answered again.")
		return
	}
	if err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d#m%d", sent.Thread.ID, sent.Assistant.ID))
}

// title serves GET /t/{id}/title: it waits (a little) for the generated
// title and swaps it into the sidebar and the header.
func (h *threads) title(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	changed := h.rt.TitleChanged(id)
	t, err := h.store.Thread(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	if t.TitleState == "provisional" {
		select {
		case <-changed:
		case <-time.After(titleWait):
		case <-r.Context().Done():
			return
		}
		if t, err = h.store.Thread(r.Context(), u.ID, id); err != nil {
			storeError(w, r, err)
			return
		}
	}
	render(w, r, http.StatusOK, views.TitleUpdate(t))
}

// titleWait is how long GET /t/{id}/title waits for a generated title.
const titleWait = 25 * time.Second

// messageViews pairs each streaming answer with its active run.
func messageViews(msgs []db.Message, active []db.Run) []views.MessageView {
	byMsg := map[int64]*db.Run{}
	for i := range active {
		if m := active[i].AssistantMessageID; m != nil {
			byMsg[*m] = &active[i]
		}
	}
	out := make([]views.MessageView, len(msgs))
	for i, m := range msgs {
		out[i] = views.MessageView{Message: m, Run: byMsg[m.ID]}
	}
	return out
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

func threadTitleOr(t string) string {
	if t == "" {
		return "Untitled"
	}
	return t
}
