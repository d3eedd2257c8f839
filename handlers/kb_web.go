package handlers

import (
	"context"
	"fmt"
	"net/http"

	"weft/db"
	"weft/internal/usererr"
	"weft/rag"
	"weft/views"
)

// webKnowledge is what the web part of a knowledge base's page needs from
// package rag, which owns the rules (addresses, bounds, what a page may be).
type webKnowledge interface {
	AddFromWeb(ctx context.Context, user int64, kb db.KnowledgeBase, in rag.WebInput, maxUserBytes int64) (string, error)
	Refetch(ctx context.Context, user, doc int64, maxUserBytes int64) error
	RefetchAll(ctx context.Context, user int64, kb db.KnowledgeBase, maxUserBytes int64) (string, error)
	WebOn() bool
}

type webStore interface {
	WebCrawls(ctx context.Context, user, kb int64, limit int) ([]db.WebCrawl, error)
	WebSummary(ctx context.Context, user, kb int64) (db.WebSummary, error)
}

// kbWeb serves a knowledge base's pages from the web: adding them, the
// crawls panel, re-fetching. The knowledge base and document lookups (and
// their authorization) are the kbs handler's.
type kbWeb struct {
	kbs   *kbs
	web   webKnowledge
	store webStore
}

// on refuses every route of knowledge from the web, with the reason, on a
// server that turned it off (WEFT_KB_WEB=off): before the knowledge base
// is looked up, so the answer is the same whoever asks.
func (h *kbWeb) on(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.web.WebOn() {
			msg, _ := usererr.Message(rag.ErrWebOff)
			errorPage(w, r, http.StatusForbidden, msg)
			return
		}
		next(w, r)
	}
}

// add serves POST /kb/{id}/web: a page, or a site's sitemap.
func (h *kbWeb) add(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, ok := h.kbs.kb(w, r)
	if !ok || !parseForm(w, r) {
		return
	}
	f := r.PostForm
	msg, err := h.web.AddFromWeb(r.Context(), u.ID, kb, rag.WebInput{URL: f.Get("url"), Sitemap: f.Get("scope") == "sitemap",
		MaxPages: f.Get("max_pages"), MaxDepth: f.Get("max_depth")}, h.kbs.maxBytes)
	if refusal, ok := usererr.Message(err); ok {
		msg = "Not added: " + refusal
	} else if err != nil {
		storeError(w, r, err)
		return
	}
	h.kbs.shell.sessions.Put(r.Context(), sessionFlash, msg)
	redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
}

// panel serves GET /kb/{id}/web: the crawls and the re-fetch of every page.
func (h *kbWeb) panel(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, ok := h.kbs.kb(w, r)
	if !ok {
		return
	}
	d := views.KBWebData{KBID: kb.ID}
	var err error
	if d.Crawls, err = h.store.WebCrawls(r.Context(), u.ID, kb.ID, 3); err != nil {
		serverError(w, r, err)
		return
	}
	if d.Summary, err = h.store.WebSummary(r.Context(), u.ID, kb.ID); err != nil {
		serverError(w, r, err)
		return
	}
	render(w, r, http.StatusOK, views.KBWebPanel(d))
}

// refetch serves POST /kb/{id}/documents/{doc}/refetch.
func (h *kbWeb) refetch(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, doc, ok := h.kbs.document(w, r)
	if !ok {
		return
	}
	if refused(w, r, h.web.Refetch(r.Context(), u.ID, doc.ID, h.kbs.maxBytes)) {
		return
	}
	redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
}

// refetchAll serves POST /kb/{id}/refetch.
func (h *kbWeb) refetchAll(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, ok := h.kbs.kb(w, r)
	if !ok {
		return
	}
	msg, err := h.web.RefetchAll(r.Context(), u.ID, kb, h.kbs.maxBytes)
	if refused(w, r, err) {
		return
	}
	h.kbs.shell.sessions.Put(r.Context(), sessionFlash, msg)
	redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
}
