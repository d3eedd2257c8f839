package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"weft/db"
	"weft/internal/usererr"
	"weft/rag"
	"weft/views"
)

type kbStore interface {
	KBs(ctx context.Context, user, workspace int64) ([]db.KnowledgeBase, error)
	KB(ctx context.Context, user, id int64) (db.KnowledgeBase, error)
	DeleteKB(ctx context.Context, user, id int64) ([]db.ThreadRef, error)
	KBThreads(ctx context.Context, user, kb int64) ([]db.ThreadRef, error)
	Documents(ctx context.Context, user, kb int64) ([]db.Document, error)
	Document(ctx context.Context, user, id int64) (db.Document, error)
	DeleteDocument(ctx context.Context, user, id int64) error
	Message(ctx context.Context, user, id int64) (db.Message, error)
	RoomMessageForMember(ctx context.Context, user, id int64) (db.Message, error)
}

// knowledge is what the knowledge base pages need from package rag, which
// owns the rules (names, models, settings, uploads); its refusals carry
// their message for the user (usererr).
type knowledge interface {
	CreateKB(ctx context.Context, user, workspace int64, name, model string) (db.KnowledgeBase, string, error)
	RenameKB(ctx context.Context, user, kb int64, name string) error
	UpdateSettings(ctx context.Context, user int64, kb db.KnowledgeBase, in rag.Settings) error
	ChangeModel(ctx context.Context, user int64, kb db.KnowledgeBase, model string) (bool, error)
	AddFile(ctx context.Context, user int64, kb db.KnowledgeBase, name string, r io.Reader, maxUserBytes int64) error
	RetryDocument(ctx context.Context, user, doc int64) error
	SearchKB(ctx context.Context, user int64, kb db.KnowledgeBase, question string, rw rag.Rewriter) ([]rag.Result, []string, error)
	MaxFileBytes() int64
	WebOn() bool
}

type embedCatalog interface {
	EmbedModels(ctx context.Context) []string
	NumCtx(ctx context.Context, model string) int
}

// kbs serves /kb: knowledge bases, their documents and the retrieval view.
type kbs struct {
	store      kbStore
	rag        knowledge
	models     embedCatalog
	shell      *shell
	embedModel string // WEFT_EMBED_MODEL
	maxBytes   int64  // what one user may store (WEFT_USER_MAX_BYTES)
}

func (h *kbs) list(w http.ResponseWriter, r *http.Request) {
	h.renderList(w, r, http.StatusOK, "", "")
}

func (h *kbs) renderList(w http.ResponseWriter, r *http.Request, status int, name, errMsg string) {
	u, _ := currentUser(r)
	ws, err := h.shell.currentWorkspace(r, u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	all, err := h.store.KBs(r.Context(), u.ID, ws.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.shell.page(w, r, status, "Knowledge bases", views.KBList(views.KBListData{
		KBs: all, EmbedModels: h.models.EmbedModels(r.Context()), Default: h.embedModel, Name: name, Error: errMsg}))
}

func (h *kbs) create(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	if !parseForm(w, r) {
		return
	}
	ws, err := h.shell.currentWorkspace(r, u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	model := strings.TrimSpace(r.PostForm.Get("embed_model"))
	if model == "" {
		model = h.embedModel
	}
	kb, name, err := h.rag.CreateKB(r.Context(), u.ID, ws.ID, r.PostForm.Get("name"), model)
	if msg, ok := usererr.Message(err); ok {
		h.renderList(w, r, http.StatusUnprocessableEntity, name, msg)
		return
	}
	if err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
}

func (h *kbs) show(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, ok := h.kb(w, r)
	if !ok {
		return
	}
	d := views.KBPageData{KB: kb, EmbedModels: h.models.EmbedModels(r.Context()), MaxFileMB: h.rag.MaxFileBytes() >> 20, Web: h.rag.WebOn()}
	var err error
	if d.Docs, err = h.store.Documents(r.Context(), u.ID, kb.ID); err != nil {
		serverError(w, r, err)
		return
	}
	if d.Threads, err = h.store.KBThreads(r.Context(), u.ID, kb.ID); err != nil {
		serverError(w, r, err)
		return
	}
	if q := queryText(r, "q"); q != "" {
		d.Query, d.Searched = q, true
		res, queries, err := h.rag.SearchKB(r.Context(), u.ID, kb, q, h.rewriter(r, u.ID, kb))
		d.Queries = queries
		if msg, ok := usererr.Message(err); ok {
			d.SearchError, d.Searched = msg, false
		} else if err != nil {
			serverError(w, r, err)
			return
		}
		for _, x := range res {
			d.Results = append(d.Results, views.KBResult{Source: x.Source, Relevant: x.Relevant})
		}
	}
	h.shell.page(w, r, http.StatusOK, kb.Name, views.KBPage(d))
}

// kb loads the knowledge base named by the path (404 when not the user's).
func (h *kbs) kb(w http.ResponseWriter, r *http.Request) (db.KnowledgeBase, bool) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return db.KnowledgeBase{}, false
	}
	kb, err := h.store.KB(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return db.KnowledgeBase{}, false
	}
	return kb, true
}

func (h *kbs) rename(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, ok := h.kb(w, r)
	if !ok || !parseForm(w, r) {
		return
	}
	err := h.rag.RenameKB(r.Context(), u.ID, kb.ID, r.PostForm.Get("name"))
	if refused(w, r, err) {
		return
	}
	redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
}

func (h *kbs) delete(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, ok := h.kb(w, r)
	if !ok {
		return
	}
	detached, err := h.store.DeleteKB(r.Context(), u.ID, kb.ID)
	if err != nil {
		storeError(w, r, err)
		return
	}
	msg := fmt.Sprintf("Deleted the knowledge base %s.", kb.Name)
	if len(detached) > 0 {
		msg += fmt.Sprintf(" %d thread(s) were detached from it and kept.", len(detached))
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, msg)
	redirect(w, r, "/kb")
}

// refused answers a request whose call returned err: a refusal's message
// for the user as a 400, any other error through storeError. It reports
// whether there was an error.
func refused(w http.ResponseWriter, r *http.Request, err error) bool {
	if msg, ok := usererr.Message(err); ok {
		badRequest(w, r, msg)
		return true
	}
	if err != nil {
		storeError(w, r, err)
		return true
	}
	return false
}

// source serves GET /m/{id}/sources/{n}: one passage an answer was given,
// with where it stands and how it ranked.
func (h *kbs) source(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	n, err := strconv.Atoi(chi.URLParam(r, "n"))
	if err != nil {
		notFound(w, r)
		return
	}
	m, err := h.store.Message(r.Context(), u.ID, id)
	if errors.Is(err, db.ErrNotFound) {
		// An answer in a room: its members open its citations too.
		m, err = h.store.RoomMessageForMember(r.Context(), u.ID, id)
	}
	if err != nil {
		storeError(w, r, err)
		return
	}
	for _, s := range views.SourcesOf(m) {
		if s.N == n {
			h.shell.page(w, r, http.StatusOK, "Source "+strconv.Itoa(n), views.SourcePage(m, s))
			return
		}
	}
	notFound(w, r)
}
