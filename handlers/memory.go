package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"weft/db"
	"weft/views"
)

type memoryStore interface {
	Memories(ctx context.Context, user int64) ([]db.Memory, error)
	AddMemory(ctx context.Context, user int64, in db.MemoryInput) (db.Memory, error)
	UpdateMemory(ctx context.Context, user, id int64, fact string) error
	DeleteMemory(ctx context.Context, user, id int64) error
	ThreadTemporary(ctx context.Context, user, thread int64) (bool, error)
	SetThreadTemporary(ctx context.Context, user, thread int64, temp bool) error
	MemoryExtract(ctx context.Context, user int64) (bool, error)
	SetMemoryExtract(ctx context.Context, user int64, on bool) error
}

// memoryPages serves /memory: every fact kept about the user, where it
// came from, editable and deletable (issue 17).
type memoryPages struct {
	store memoryStore
	shell *shell
}

func (h *memoryPages) list(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "")
}

func (h *memoryPages) render(w http.ResponseWriter, r *http.Request, status int, errMsg string) {
	u, _ := currentUser(r)
	mems, err := h.store.Memories(r.Context(), u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	extract, err := h.store.MemoryExtract(r.Context(), u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.shell.page(w, r, status, "Memory", views.MemoryPage(mems, extract, errMsg))
}

// memoryRefusal is what the page says about a fact it cannot keep ("":
// another error).
func memoryRefusal(err error) string {
	if errors.Is(err, db.ErrMemoryFull) {
		return fmt.Sprintf("You have %d memories, the most kept: delete one first.", db.MaxMemories)
	}
	return ""
}

func (h *memoryPages) create(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	if !parseForm(w, r) {
		return
	}
	fact := r.PostForm.Get("fact")
	if _, err := db.NormalizeFact(fact); err != nil {
		h.render(w, r, http.StatusUnprocessableEntity, "A memory is 1 to "+fmt.Sprint(db.MaxMemoryChars)+" characters.")
		return
	}
	if _, err := h.store.AddMemory(r.Context(), u.ID, db.MemoryInput{Fact: fact, Source: db.MemoryManual}); err != nil {
		if msg := memoryRefusal(err); msg != "" {
			h.render(w, r, http.StatusUnprocessableEntity, msg)
			return
		}
		serverError(w, r, err)
		return
	}
	redirect(w, r, "/memory")
}

func (h *memoryPages) update(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	fact := r.PostForm.Get("fact")
	if _, err := db.NormalizeFact(fact); err != nil {
		h.render(w, r, http.StatusUnprocessableEntity, "A memory is 1 to "+fmt.Sprint(db.MaxMemoryChars)+" characters.")
		return
	}
	if err := h.store.UpdateMemory(r.Context(), u.ID, id, fact); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, "/memory")
}

func (h *memoryPages) delete(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	if err := h.store.DeleteMemory(r.Context(), u.ID, id); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, "/memory")
}

// temporary shows a thread's temporary switch.
func (h *memoryPages) temporary(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	temp, err := h.store.ThreadTemporary(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	render(w, r, http.StatusOK, views.ThreadTemporary(id, temp))
}

// setTemporary marks a thread temporary (temporary=true) or not.
func (h *memoryPages) setTemporary(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	temp, ok := formBool(r, "temporary")
	if !ok {
		errorPage(w, r, http.StatusBadRequest, "temporary must be true or false.")
		return
	}
	if err := h.store.SetThreadTemporary(r.Context(), u.ID, id, temp); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d", id))
}

// setExtract switches silent extraction after each answer (extract=true).
func (h *memoryPages) setExtract(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	if !parseForm(w, r) {
		return
	}
	on, ok := formBool(r, "extract")
	if !ok {
		errorPage(w, r, http.StatusBadRequest, "extract must be true or false.")
		return
	}
	if err := h.store.SetMemoryExtract(r.Context(), u.ID, on); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, "/memory")
}
