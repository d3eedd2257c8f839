package handlers

import (
	"fmt"
	"net/http"
	"strings"

	"weft/rag"
)

// settings serves POST /kb/{id}/settings: chunking and retrieval settings.
func (h *kbs) settings(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, ok := h.kb(w, r)
	if !ok || !parseForm(w, r) {
		return
	}
	f := r.PostForm
	err := h.rag.UpdateSettings(r.Context(), u.ID, kb, rag.Settings{ChunkSize: f.Get("chunk_size"),
		ChunkOverlap: f.Get("chunk_overlap"), TopK: f.Get("top_k"), MinSimilarity: f.Get("min_similarity")})
	if refused(w, r, err) {
		return
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, "Settings saved.")
	redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
}

// model serves POST /kb/{id}/model: move to another embedding model. Every
// chunk is embedded again in the background; answers keep using the old
// vectors until the new ones are complete, then switch at once.
func (h *kbs) model(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, ok := h.kb(w, r)
	if !ok || !parseForm(w, r) {
		return
	}
	model := r.PostForm.Get("embed_model")
	started, err := h.rag.ChangeModel(r.Context(), u.ID, kb, model)
	if refused(w, r, err) {
		return
	}
	if started {
		h.shell.sessions.Put(r.Context(), sessionFlash, "Embedding every document again with "+strings.TrimSpace(model)+"; answers switch to it when it is done.")
	}
	redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
}
