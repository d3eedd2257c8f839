package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"unicode/utf8"
)

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

// delete removes the thread with its messages, runs and files; the
// runtime stops its runs first.
func (h *threads) delete(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	released, err := h.rt.DeleteThread(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	slog.InfoContext(r.Context(), "thread deleted", "thread", id, "released_blobs", len(released))
	h.media.Release(r.Context(), released)
	redirect(w, r, "/")
}
