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

// setKBs serves POST /t/{id}/kbs: the knowledge bases attached to the
// thread (fields kb, one per id; none detaches all).
func (h *threads) setKBs(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	kbs, ok := formIDs(w, r, "kb")
	if !ok {
		return
	}
	if err := h.store.SetThreadKBs(r.Context(), u.ID, id, kbs); err != nil {
		storeError(w, r, err)
		return
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, kbFlash(len(kbs)))
	redirect(w, r, fmt.Sprintf("/t/%d", id))
}

func kbFlash(n int) string {
	if n == 0 {
		return "No knowledge base is attached: answers come from the model alone."
	}
	return fmt.Sprintf("%d knowledge base(s) attached: answers search them and cite their sources.", n)
}

// formIDs reads a repeated id field (at most 50 values).
func formIDs(w http.ResponseWriter, r *http.Request, field string) ([]int64, bool) {
	vals := r.PostForm[field]
	if len(vals) > 50 {
		badRequest(w, r, "Too many values for "+field+".")
		return nil, false
	}
	ids := make([]int64, 0, len(vals))
	for _, v := range vals {
		id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || id <= 0 {
			badRequest(w, r, "That knowledge base does not exist.")
			return nil, false
		}
		ids = append(ids, id)
	}
	return ids, true
}
