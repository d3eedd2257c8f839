package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"weft/db"
	"weft/views"
)

// compactTimeout is how long /compact may wait for the model's summary.
const compactTimeout = 5 * time.Minute

var timeNow = time.Now

// settings serves POST /t/{id}/settings: the thread's role, notes, context
// window and compaction switch.
func (h *threads) settings(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	var s db.ThreadSettings
	if v := r.PostForm.Get("role"); v != "" {
		role, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			badRequest(w, r, "That role does not exist.")
			return
		}
		s.RoleID = &role
	}
	notes, ok := longText(w, r, "notes", "The notes")
	if !ok {
		return
	}
	s.Notes = notes
	if v := strings.TrimSpace(r.PostForm.Get("num_ctx")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 256 || n > 1<<20 {
			badRequest(w, r, "The context window is a whole number of tokens from 256 to 1048576 (or empty). Nothing was saved.")
			return
		}
		s.NumCtx = n
	}
	s.Compaction = r.PostForm.Get("compaction") == "on"
	if err := h.store.UpdateThreadSettings(r.Context(), u.ID, id, s); err != nil {
		if errors.Is(err, db.ErrNotFound) && s.RoleID != nil {
			// The thread or the role is not the user's: both are a 404.
			notFound(w, r)
			return
		}
		storeError(w, r, err)
		return
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, "Saved the thread's context settings.")
	redirect(w, r, fmt.Sprintf("/t/%d", id))
}

// context serves GET /t/{id}/context: the gauge of how full the context
// window is for the next message.
func (h *threads) context(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	g, err := h.rt.ContextGauge(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	render(w, r, http.StatusOK, views.ContextGauge(id, g.Estimate, g.NumCtx, g.Summarized))
}
