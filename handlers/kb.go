package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/extract"
	"weft/internal/usererr"
	"weft/rag"
	"weft/views"
)

type kbStore interface {
	KBs(ctx context.Context, user, workspace int64) ([]db.KnowledgeBase, error)
	KB(ctx context.Context, user, id int64) (db.KnowledgeBase, error)
	CreateKB(ctx context.Context, user, workspace int64, in db.KBInput) (db.KnowledgeBase, error)
	RenameKB(ctx context.Context, user, id int64, name string) error
	UpdateKBSettings(ctx context.Context, user, id int64, in db.KBInput) error
	DeleteKB(ctx context.Context, user, id int64) ([]db.ThreadRef, error)
	KBThreads(ctx context.Context, user, kb int64) ([]db.ThreadRef, error)
	Documents(ctx context.Context, user, kb int64) ([]db.Document, error)
	Document(ctx context.Context, user, id int64) (db.Document, error)
	AddDocument(ctx context.Context, user, kb int64, in db.NewDocument, enqueue func(pgx.Tx, db.Document) error) (db.Document, error)
	DeleteDocument(ctx context.Context, user, id int64) error
	RequeueDocument(ctx context.Context, user, id int64, enqueue func(pgx.Tx, db.Document) error) error
	StartReembed(ctx context.Context, user, kb int64, model string, dims int, enqueue func(pgx.Tx, db.KnowledgeBase) error) error
	Message(ctx context.Context, user, id int64) (db.Message, error)
}

// knowledge is what the knowledge base pages need from package rag.
type knowledge interface {
	EnqueueIngest(ctx context.Context) func(pgx.Tx, db.Document) error
	EnqueueReembed(ctx context.Context) func(pgx.Tx, db.KnowledgeBase) error
	Dimensions(ctx context.Context, model string) (int, error)
	Search(ctx context.Context, q rag.Query) ([]rag.Result, error)
	MaxFileBytes() int64
}

type embedCatalog interface {
	EmbedModels(ctx context.Context) []string
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
	name := strings.Join(strings.Fields(r.PostForm.Get("name")), " ")
	model := strings.TrimSpace(r.PostForm.Get("embed_model"))
	if name == "" || utf8.RuneCountInString(name) > 100 {
		h.renderList(w, r, http.StatusUnprocessableEntity, name, "A knowledge base needs a name of 1 to 100 characters.")
		return
	}
	if model == "" {
		model = h.embedModel
	}
	if model == "" || len(model) > 200 {
		h.renderList(w, r, http.StatusUnprocessableEntity, name, "Choose an embedding model (pull one with `ollama pull nomic-embed-text`).")
		return
	}
	ws, err := h.shell.currentWorkspace(r, u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	dims, err := h.rag.Dimensions(r.Context(), model)
	if err != nil {
		h.renderList(w, r, http.StatusUnprocessableEntity, name, fmt.Sprintf("The embedding model %q could not be used: %s", model, embedProblem(r, err)))
		return
	}
	if dims > db.MaxDims {
		h.renderList(w, r, http.StatusUnprocessableEntity, name, fmt.Sprintf("The embedding model %q makes vectors of %d dimensions; Weft's index takes at most %d. Choose another model.", model, dims, db.MaxDims))
		return
	}
	kb, err := h.store.CreateKB(r.Context(), u.ID, ws.ID, db.KBInput{Name: name, EmbedModel: model, Dims: dims})
	if errors.Is(err, db.ErrConflict) {
		h.renderList(w, r, http.StatusUnprocessableEntity, name, fmt.Sprintf("This workspace already has a knowledge base named %q.", name))
		return
	}
	if err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
}

// embedProblem is the user's part of an embedding error, told by its type:
// the Ollama client's api.StatusError (404: no such model, 501: it cannot
// embed), a transport error (*url.Error, net.Error: Ollama is not
// reachable); anything else is logged with the request.
func embedProblem(r *http.Request, err error) string {
	var se api.StatusError
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.As(err, &se) && se.StatusCode == http.StatusNotFound:
		return "it is not on the Ollama server (ollama pull it first)."
	case errors.As(err, &se) && se.StatusCode == http.StatusNotImplemented:
		return "it cannot make embeddings; choose an embedding model."
	case errors.As(err, &se):
		return "Ollama refused it."
	case errors.As(err, &ue), errors.As(err, &ne):
		return "Ollama is not reachable."
	}
	slog.WarnContext(r.Context(), "embedding probe failed", "path", r.URL.Path, "err", err)
	return "Ollama refused it."
}

func (h *kbs) show(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, ok := h.kb(w, r)
	if !ok {
		return
	}
	d := views.KBPageData{KB: kb, EmbedModels: h.models.EmbedModels(r.Context()), MaxFileMB: h.rag.MaxFileBytes() >> 20}
	var err error
	if d.Docs, err = h.store.Documents(r.Context(), u.ID, kb.ID); err != nil {
		serverError(w, r, err)
		return
	}
	if d.Threads, err = h.store.KBThreads(r.Context(), u.ID, kb.ID); err != nil {
		serverError(w, r, err)
		return
	}
	if q := strings.TrimSpace(r.URL.Query().Get("q")); q != "" {
		d.Query, d.Searched = q, true
		if utf8.RuneCountInString(q) > 2000 {
			d.SearchError, d.Searched = "The question is longer than 2,000 characters.", false
		} else {
			res, err := h.rag.Search(r.Context(), rag.Query{User: u.ID, KBs: []db.KnowledgeBase{kb}, Text: q, All: true, TopK: kb.TopK})
			switch {
			case usererr.Is(err):
				d.SearchError, d.Searched = usererr.Capitalize(usererr.Or(err, "")), false
			case err != nil:
				serverError(w, r, err)
				return
			}
			for _, x := range res {
				d.Results = append(d.Results, views.KBResult{Source: x.Source, Relevant: x.Relevant})
			}
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

func (h *kbs) documents(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, ok := h.kb(w, r)
	if !ok {
		return
	}
	docs, err := h.store.Documents(r.Context(), u.ID, kb.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	render(w, r, http.StatusOK, views.KBDocuments(kb.ID, docs))
}

// upload serves POST /kb/{id}/upload: any number of files, read one at a
// time from the multipart stream; each is checked (size, type, duplicate)
// on its own, so one bad file does not lose the others.
func (h *kbs) upload(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, ok := h.kb(w, r)
	if !ok {
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		badRequest(w, r, "Choose one or more files to upload.")
		return
	}
	max := h.rag.MaxFileBytes()
	var added int
	var refused []string
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				refused = append(refused, "the rest of the upload: it is larger in total than this server accepts at once; upload fewer files at a time")
			} else {
				refused = append(refused, "the rest of the upload: it could not be read")
			}
			break
		}
		if part.FormName() != "files" || part.FileName() == "" {
			continue
		}
		name := cleanFileName(part.FileName())
		data, err := io.ReadAll(io.LimitReader(part, max+1))
		switch {
		case err != nil:
			refused = append(refused, name+": the upload was cut off")
			continue
		case int64(len(data)) > max:
			refused = append(refused, fmt.Sprintf("%s: larger than the limit of %s a file", name, byteSize(max)))
			continue
		case len(data) == 0:
			refused = append(refused, name+": the file is empty")
			continue
		}
		if _, err := extract.Detect(name, data); err != nil {
			refused = append(refused, name+": "+usererr.Or(err, extract.ErrUnsupported.Error()))
			continue
		}
		sum := sha256.Sum256(data)
		doc, err := h.store.AddDocument(r.Context(), u.ID, kb.ID, db.NewDocument{Name: name, SHA256: hex.EncodeToString(sum[:]), Data: data,
			MaxUserBytes: h.maxBytes}, h.rag.EnqueueIngest(r.Context()))
		switch {
		case errors.Is(err, db.ErrStorageLimit):
			refused = append(refused, name+": "+storageLimitMessage(h.maxBytes))
		case errors.Is(err, db.ErrDuplicate):
			refused = append(refused, fmt.Sprintf("%s: the same content is already in this knowledge base (as %s)", name, doc.Name))
		case err != nil:
			storeError(w, r, err)
			return
		default:
			added++
		}
	}
	msg := fmt.Sprintf("%d file(s) added; they are being read and indexed.", added)
	if len(refused) > 0 {
		msg += " Not added: " + strings.Join(refused, "; ") + "."
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, msg)
	redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
}

// cleanFileName keeps the base name, without control characters, at most
// 200 characters: it is only ever shown, never used as a path.
func cleanFileName(name string) string {
	name = path.Base(strings.ReplaceAll(name, `\`, "/"))
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, name)
	if r := []rune(name); len(r) > 200 {
		name = string(r[:200])
	}
	if name == "" || name == "." || name == "/" {
		name = "unnamed"
	}
	return name
}

func (h *kbs) rename(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, ok := h.kb(w, r)
	if !ok || !parseForm(w, r) {
		return
	}
	name := strings.Join(strings.Fields(r.PostForm.Get("name")), " ")
	if name == "" || utf8.RuneCountInString(name) > 100 {
		badRequest(w, r, "A knowledge base needs a name of 1 to 100 characters.")
		return
	}
	if err := h.store.RenameKB(r.Context(), u.ID, kb.ID, name); err != nil {
		if errors.Is(err, db.ErrConflict) {
			badRequest(w, r, "This workspace already has a knowledge base with that name.")
			return
		}
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
}

func (h *kbs) settings(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, ok := h.kb(w, r)
	if !ok || !parseForm(w, r) {
		return
	}
	in := db.KBInput{ChunkSize: kb.ChunkSize, ChunkOverlap: kb.ChunkOverlap, TopK: kb.TopK, MinSimilarity: kb.MinSimilarity}
	var errs []string
	num := func(field string, lo, hi int, dst *int) {
		if v := strings.TrimSpace(r.PostForm.Get(field)); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < lo || n > hi {
				errs = append(errs, fmt.Sprintf("%s must be a whole number from %d to %d", field, lo, hi))
				return
			}
			*dst = n
		}
	}
	num("chunk_size", 200, 20000, &in.ChunkSize)
	num("chunk_overlap", 0, 5000, &in.ChunkOverlap)
	num("top_k", 1, 50, &in.TopK)
	if v := strings.TrimSpace(r.PostForm.Get("min_similarity")); v != "" {
		f, err := strconv.ParseFloat(strings.ReplaceAll(v, ",", "."), 64)
		if err != nil || f < -1 || f > 1 {
			errs = append(errs, "min_similarity must be a number from -1 to 1")
		} else {
			in.MinSimilarity = f
		}
	}
	if in.ChunkOverlap >= in.ChunkSize {
		errs = append(errs, "the overlap must be smaller than the chunk size")
	}
	if len(errs) > 0 {
		badRequest(w, r, "Not saved: "+strings.Join(errs, "; ")+".")
		return
	}
	if err := h.store.UpdateKBSettings(r.Context(), u.ID, kb.ID, in); err != nil {
		storeError(w, r, err)
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
	model := strings.TrimSpace(r.PostForm.Get("embed_model"))
	if model == "" || len(model) > 200 {
		badRequest(w, r, "Choose an embedding model.")
		return
	}
	if kb.PendingModel != "" {
		badRequest(w, r, "This knowledge base is already moving to "+kb.PendingModel+"; wait until it is done.")
		return
	}
	if strings.EqualFold(model, kb.EmbedModel) {
		redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
		return
	}
	dims, err := h.rag.Dimensions(r.Context(), model)
	if err != nil {
		badRequest(w, r, fmt.Sprintf("The embedding model %q could not be used: %s", model, embedProblem(r, err)))
		return
	}
	if dims > db.MaxDims {
		badRequest(w, r, fmt.Sprintf("The embedding model %q makes vectors of %d dimensions; Weft's index takes at most %d.", model, dims, db.MaxDims))
		return
	}
	err = h.store.StartReembed(r.Context(), u.ID, kb.ID, model, dims, h.rag.EnqueueReembed(r.Context()))
	if errors.Is(err, db.ErrConflict) {
		badRequest(w, r, "This knowledge base is already moving to another model; wait until it is done.")
		return
	}
	if err != nil {
		storeError(w, r, err)
		return
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, "Embedding every document again with "+model+"; answers switch to it when it is done.")
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

// document loads the document named by the path inside the path's
// knowledge base.
func (h *kbs) document(w http.ResponseWriter, r *http.Request) (db.KnowledgeBase, db.Document, bool) {
	u, _ := currentUser(r)
	kb, ok := h.kb(w, r)
	if !ok {
		return kb, db.Document{}, false
	}
	id, ok := pathID(w, r, "doc")
	if !ok {
		return kb, db.Document{}, false
	}
	doc, err := h.store.Document(r.Context(), u.ID, id)
	if err != nil || doc.KBID != kb.ID {
		notFound(w, r)
		return kb, db.Document{}, false
	}
	return kb, doc, true
}

func (h *kbs) deleteDocument(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, doc, ok := h.document(w, r)
	if !ok {
		return
	}
	if err := h.store.DeleteDocument(r.Context(), u.ID, doc.ID); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
}

func (h *kbs) retryDocument(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	kb, doc, ok := h.document(w, r)
	if !ok {
		return
	}
	err := h.store.RequeueDocument(r.Context(), u.ID, doc.ID, h.rag.EnqueueIngest(r.Context()))
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
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

// byteSize says a size the way people read it.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
