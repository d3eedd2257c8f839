package handlers

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"weft/db"
	"weft/internal/usererr"
	"weft/views"
)

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
	render(w, r, http.StatusOK, views.KBDocuments(kb.ID, docs, h.rag.WebOn()))
}

// upload serves POST /kb/{id}/upload: any number of files, read one at a
// time from the multipart stream; rag checks each on its own (size, type,
// quota, duplicate), so one bad file does not lose the others.
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
	var added int
	var notAdded []string
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			notAdded = append(notAdded, "the rest of the upload: "+unreadUpload(err))
			break
		}
		if part.FormName() != "files" || part.FileName() == "" {
			continue
		}
		err = h.rag.AddFile(r.Context(), u.ID, kb, part.FileName(), part, h.maxBytes)
		if msg, ok := usererr.Message(err); ok {
			notAdded = append(notAdded, msg)
		} else if err != nil {
			storeError(w, r, err)
			return
		} else {
			added++
		}
	}
	msg := fmt.Sprintf("%d file(s) added; they are being read and indexed.", added)
	if len(notAdded) > 0 {
		msg += " Not added: " + strings.Join(notAdded, "; ") + "."
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, msg)
	redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
}

// unreadUpload says why the multipart stream of an upload stopped.
func unreadUpload(err error) string {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return "it is larger in total than this server accepts at once; upload fewer files at a time"
	}
	return "it could not be read"
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
		if errors.Is(err, db.ErrBusy) {
			errorPage(w, r, http.StatusConflict, "This knowledge base is being indexed again for its new language; delete the document when that is done.")
			return
		}
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
	if err := h.rag.RetryDocument(r.Context(), u.ID, doc.ID); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/kb/%d", kb.ID))
}
