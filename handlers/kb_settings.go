package handlers

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"weft/db"
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
	in := rag.Settings{ChunkSize: f.Get("chunk_size"), ChunkOverlap: f.Get("chunk_overlap"), TopK: f.Get("top_k"),
		MinSimilarity: f.Get("min_similarity"), Language: f.Get("language")}
	// An unticked checkbox sends nothing: the form marks that it had one.
	if f.Has("rewrite_present") {
		on := f.Get("rewrite_queries") == "on"
		in.RewriteQueries = &on
	}
	err := h.rag.UpdateSettings(r.Context(), u.ID, kb, in)
	if refused(w, r, err) {
		return
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, "Settings saved.")
	redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
}

// rewriter is the model that rewrites the retrieval view's question when
// the knowledge base rewrites questions: the one a new thread of its
// workspace answers with (the view has no thread).
func (h *kbs) rewriter(r *http.Request, user int64, kb db.KnowledgeBase) rag.Rewriter {
	if !kb.RewriteQueries {
		return rag.Rewriter{}
	}
	ws, err := h.shell.store.Workspace(r.Context(), user, kb.WorkspaceID)
	if err != nil {
		slog.WarnContext(r.Context(), "retrieval view: no workspace to rewrite with", "kb", kb.ID, "err", err)
		return rag.Rewriter{}
	}
	model := h.shell.defaultModel(r.Context(), ws)
	return rag.Rewriter{Model: model, NumCtx: h.models.NumCtx(r.Context(), model)}
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
