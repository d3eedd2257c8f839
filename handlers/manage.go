package handlers

import (
	"bytes"
	"context"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/a-h/templ"
	"github.com/go-chi/chi/v5"

	"weft/chat"
	"weft/db"
	"weft/views"
)

type manageStore interface {
	Thread(ctx context.Context, user, id int64) (db.Thread, error)
	Search(ctx context.Context, user, workspace int64, q string, limit int) ([]db.SearchHit, error)
	ArchivedThreads(ctx context.Context, user, workspace int64, limit int) ([]db.ThreadSummary, error)
	MoveThread(ctx context.Context, user, thread, workspace int64) error
	TreeMessages(ctx context.Context, user, thread int64) ([]db.Message, error)
	ActivePath(ctx context.Context, user, thread int64, limit int) ([]db.Message, bool, error)
}

// manage serves finding and moving threads: search, the archive, moving a
// thread to another workspace, export (imports are in imports.go).
type manage struct {
	store manageStore
	shell *shell
}

const (
	searchLimit   = 50
	archivedLimit = 500
)

// page renders a main column inside the current workspace's shell.
func (h *manage) page(w http.ResponseWriter, r *http.Request, status int, title string, main func(*views.Shell) templ.Component) {
	u, _ := currentUser(r)
	ws, err := h.shell.currentWorkspace(r, u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	s, err := h.shell.build(r.Context(), u, ws, 0, title)
	if err != nil {
		serverError(w, r, err)
		return
	}
	body := main(&s)
	render(w, r, status, views.Page(title, views.App(s, body)))
}

// search serves GET /search?q=: the current workspace's threads and
// messages matching q, with highlighted snippets that jump to the message.
func (h *manage) search(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	q := queryText(r, "q")
	if len(q) > 500 {
		badRequest(w, r, "Search for at most 500 characters.")
		return
	}
	ws, err := h.shell.currentWorkspace(r, u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	hits, err := h.store.Search(r.Context(), u.ID, ws.ID, q, searchLimit)
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.page(w, r, http.StatusOK, "Search", func(s *views.Shell) templ.Component {
		s.Search = q
		return views.SearchPage(ws, q, hits)
	})
}

// archived serves GET /archived: the current workspace's archived threads.
func (h *manage) archived(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	ws, err := h.shell.currentWorkspace(r, u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	threads, err := h.store.ArchivedThreads(r.Context(), u.ID, ws.ID, archivedLimit)
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.page(w, r, http.StatusOK, "Archived threads", func(*views.Shell) templ.Component {
		return views.ArchivedPage(ws, threads)
	})
}

// move serves POST /t/{id}/move: the thread goes to another workspace.
func (h *manage) move(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	target, err := strconv.ParseInt(r.PostForm.Get("workspace_id"), 10, 64)
	if err != nil {
		badRequest(w, r, "Choose the workspace to move the thread to.")
		return
	}
	if err := h.store.MoveThread(r.Context(), u.ID, id, target); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d", id))
}

// export serves GET /t/{id}/export.md (the visible conversation) and
// /t/{id}/export.json (the whole tree, for import).
func (h *manage) export(w http.ResponseWriter, r *http.Request) {
	u, t, ok := pathThread(w, r, h.store)
	if !ok {
		return
	}
	format := chi.URLParam(r, "format")
	if format != "md" && format != "json" {
		notFound(w, r)
		return
	}
	var buf bytes.Buffer
	switch format {
	case "json":
		msgs, err := h.store.TreeMessages(r.Context(), u.ID, t.ID)
		if err == nil {
			err = chat.ExportJSON(&buf, t, msgs)
		}
		if err != nil {
			serverError(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	default:
		path, _, err := h.store.ActivePath(r.Context(), u.ID, t.ID, 1_000_000)
		if err == nil {
			err = chat.ExportMarkdown(&buf, t, path)
		}
		if err != nil {
			serverError(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	}
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{
		"filename": exportName(t) + "." + format,
	}))
	_, _ = w.Write(buf.Bytes())
}

// exportName is a file name for a thread: its title, made safe.
func exportName(t db.Thread) string {
	var b strings.Builder
	for _, r := range t.Title {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
		if b.Len() >= 60 {
			break
		}
	}
	if b.Len() == 0 {
		return fmt.Sprintf("thread-%d", t.ID)
	}
	return b.String()
}
