package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"

	"github.com/a-h/templ"

	"weft/chat"
	"weft/db"
	"weft/importer"
	"weft/internal/usererr"
	"weft/views"
)

// Importer imports other apps' exports in the background (importer.Service).
type Importer interface {
	Start(ctx context.Context, user, workspace int64, format, fileName string, file io.Reader) (db.Import, error)
	Limits() importer.Limits
}

type importStore interface {
	ImportThread(ctx context.Context, user, workspace int64, in db.ImportedThread) (db.Thread, error)
	Imports(ctx context.Context, user int64, limit int) ([]db.Import, error)
	UserImport(ctx context.Context, user, id int64) (db.Import, error)
	ImportItems(ctx context.Context, user, id int64, limit int) ([]db.ImportItem, error)
	StopImport(ctx context.Context, user, id int64) error
	Workspace(ctx context.Context, user, id int64) (db.Workspace, error)
}

// importPages serve /import (one form for every format) and each
// background import's progress and report.
type importPages struct {
	store   importStore
	imports Importer // nil: only Weft's own exports
	shell   *shell
	manage  *manage
}

const (
	recentImports     = 20
	importReportItems = 1000 // of each kind, skipped and imported
)

// maxBytes is the largest file the form accepts.
func (h *importPages) maxBytes() int64 {
	if h.imports == nil {
		return chat.MaxImportBytes
	}
	return max(h.imports.Limits().MaxBytes, chat.MaxImportBytes)
}

// show serves GET /import.
func (h *importPages) show(w http.ResponseWriter, r *http.Request) { h.form(w, r, http.StatusOK, "") }

func (h *importPages) form(w http.ResponseWriter, r *http.Request, status int, msg string) {
	u, _ := currentUser(r)
	recent, err := h.store.Imports(r.Context(), u.ID, recentImports)
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.manage.page(w, r, status, "Import conversations", func(s *views.Shell) templ.Component {
		var active []db.Workspace
		for _, ws := range s.Workspaces {
			if !ws.Archived() {
				active = append(active, ws)
			}
		}
		return views.ImportPage(views.ImportForm{Workspace: s.Workspace, Workspaces: active, Recent: recent,
			MaxBytes: h.maxBytes(), Error: msg})
	})
}

// upload serves POST /import: the format is told from the file's content.
// A Weft thread becomes a thread at once; a ChatGPT or Open WebUI export is
// stored and imported by a job (the answer is its page). A file that is
// none of them is refused with the reason; nothing is stored.
func (h *importPages) upload(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	// Files larger than 1 MiB wait on disk (net/http removes them after
	// the request), not in memory.
	if err := r.ParseMultipartForm(1 << 20); err != nil {
		msg := "Choose a file to import."
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			msg = fmt.Sprintf("That file is too large: exports up to %s can be imported.", usererr.Size(h.maxBytes()))
		}
		h.form(w, r, http.StatusUnprocessableEntity, msg)
		return
	}
	file, hdr, err := r.FormFile("file")
	if err != nil {
		h.form(w, r, http.StatusUnprocessableEntity, "Choose a file to import.")
		return
	}
	defer file.Close()
	ws, err := h.target(r, u.ID)
	if err != nil {
		storeError(w, r, err)
		return
	}
	content, format, err := h.detect(file, hdr.Size)
	if isRefusal(err) {
		h.form(w, r, http.StatusUnprocessableEntity, "Not imported: "+usererr.Capitalize(err.Error())+".")
		return
	}
	if err != nil {
		serverError(w, r, err)
		return
	}
	defer content.Close()
	if format == importer.FormatWeft {
		if hdr.Size > chat.MaxImportBytes {
			h.form(w, r, http.StatusUnprocessableEntity, fmt.Sprintf("That file is too large: Weft thread exports up to %s can be imported.",
				usererr.Size(chat.MaxImportBytes)))
			return
		}
		h.weftThread(w, r, u.ID, ws.ID, content)
		return
	}
	imp, err := h.imports.Start(r.Context(), u.ID, ws.ID, format, hdr.Filename, content)
	if isRefusal(err) { // a .zip found broken past its first MiB
		h.form(w, r, http.StatusUnprocessableEntity, "Not imported: "+usererr.Capitalize(err.Error())+".")
		return
	}
	if msg, ok := usererr.Message(err); ok {
		h.form(w, r, http.StatusUnprocessableEntity, "Not imported: "+msg)
		return
	}
	if err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/imports/%d", imp.ID))
}

// detect tells an upload's format from its first bytes and returns its
// content from the start: the file itself, or the conversations.json of
// ChatGPT's .zip export, decompressed as it is read.
func (h *importPages) detect(file multipart.File, size int64) (io.ReadCloser, string, error) {
	prefix := make([]byte, importer.DetectBytes)
	n, _ := io.ReadFull(file, prefix)
	var content io.ReadCloser = io.NopCloser(file)
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return nil, "", err
	}
	if importer.IsZip(prefix[:n]) && h.imports != nil {
		zc, err := importer.OpenZip(file, size)
		if err != nil {
			return nil, "", err
		}
		if n, err = io.ReadFull(zc, prefix); errors.Is(err, importer.ErrBadZip) {
			zc.Close()
			return nil, "", err
		}
		content = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(prefix[:n]), zc), zc}
	}
	format, err := importer.Detect(prefix[:n])
	if err == nil && format != importer.FormatWeft && h.imports == nil {
		err = importer.ErrUnknownFormat
	}
	if err != nil {
		content.Close()
		return nil, "", err
	}
	return content, format, nil
}

// isRefusal tells the reasons detect refuses a file, said to the user, from
// failures of the server.
func isRefusal(err error) bool {
	for _, e := range []error{importer.ErrUnknownFormat, importer.ErrEmpty, importer.ErrNoConversations, importer.ErrBadZip} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// target is the workspace chosen on the form (the user's, active), else the
// current one.
func (h *importPages) target(r *http.Request, user int64) (db.Workspace, error) {
	if v := r.PostForm.Get("workspace_id"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return db.Workspace{}, db.ErrNotFound
		}
		ws, err := h.store.Workspace(r.Context(), user, id)
		if err == nil && ws.Archived() {
			err = db.ErrNotFound
		}
		return ws, err
	}
	return h.shell.currentWorkspace(r, user)
}

// weftThread imports Weft's own thread export at once (it is at most
// chat.MaxImportBytes).
func (h *importPages) weftThread(w http.ResponseWriter, r *http.Request, user, ws int64, file io.Reader) {
	in, err := chat.ParseImport(file)
	if msg, ok := usererr.Message(err); ok {
		h.form(w, r, http.StatusUnprocessableEntity, "Not imported: "+msg+".")
		return
	}
	if err != nil {
		serverError(w, r, err)
		return
	}
	t, err := h.store.ImportThread(r.Context(), user, ws, in)
	if err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d", t.ID))
}

// report serves GET /imports/{id}: an import's progress, then its report.
func (h *importPages) report(w http.ResponseWriter, r *http.Request) {
	imp, items, ok := h.load(w, r)
	if !ok {
		return
	}
	h.manage.page(w, r, http.StatusOK, "Import", func(*views.Shell) templ.Component {
		return views.ImportReportPage(imp, items)
	})
}

// progress serves GET /imports/{id}/progress: the live part of the page.
func (h *importPages) progress(w http.ResponseWriter, r *http.Request) {
	imp, items, ok := h.load(w, r)
	if !ok {
		return
	}
	render(w, r, http.StatusOK, views.ImportProgress(imp, items))
}

// stop serves POST /imports/{id}/stop: the import ends before its next
// conversation; what was imported stays.
func (h *importPages) stop(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	if err := h.store.StopImport(r.Context(), u.ID, id); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/imports/%d", id))
}

// load reads one of the user's imports (another user's is a 404) and,
// once it has ended, its report.
func (h *importPages) load(w http.ResponseWriter, r *http.Request) (db.Import, []db.ImportItem, bool) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return db.Import{}, nil, false
	}
	imp, err := h.store.UserImport(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return db.Import{}, nil, false
	}
	var items []db.ImportItem
	if imp.Finished() {
		if items, err = h.store.ImportItems(r.Context(), u.ID, id, importReportItems); err != nil {
			serverError(w, r, err)
			return db.Import{}, nil, false
		}
	}
	return imp, items, true
}
