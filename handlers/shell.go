package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/alexedwards/scs/v2"

	"weft/db"
	"weft/views"
)

// sessionFlash holds the outcome of an action for the next page (for
// example a slash command that reloads the thread).
const sessionFlash = "flash"

// sidebarPageSize is how many threads one sidebar page shows.
const sidebarPageSize = 50

// sidebarRooms is how many of the user's rooms the sidebar lists (all of
// them are on /rooms).
const sidebarRooms = 100

type shellStore interface {
	Workspace(ctx context.Context, user, id int64) (db.Workspace, error)
	DefaultWorkspace(ctx context.Context, user int64) (db.Workspace, error)
	Workspaces(ctx context.Context, user int64) ([]db.Workspace, error)
	SidebarThreads(ctx context.Context, user, workspace int64, after *db.ThreadCursor, limit int) ([]db.ThreadSummary, *db.ThreadCursor, error)
	MemberRooms(ctx context.Context, user int64, limit int) ([]db.RoomSummary, error)
}

type modelCatalog interface {
	ChatModels(ctx context.Context) []string
	Default(ctx context.Context) string
	Problem(ctx context.Context) string
	// Where names the servers that have a model when there are several
	// (nil with one).
	Where(name string) []string
}

// shell builds what every signed-in page shows around its main column.
type shell struct {
	store    shellStore
	sessions *scs.SessionManager
	models   modelCatalog
	agent    *agentTools // fills the composer's agent part
}

// currentWorkspace is the workspace a page is about: the one named by the
// ?w= parameter (links from a page carry the workspace that page shows),
// else the one chosen in this session, else the default one.
func (s *shell) currentWorkspace(r *http.Request, user int64) (db.Workspace, error) {
	ctx := r.Context()
	if id, err := strconv.ParseInt(r.URL.Query().Get("w"), 10, 64); err == nil {
		if w, err := s.store.Workspace(ctx, user, id); err == nil && !w.Archived() {
			return w, nil
		}
	}
	if id := s.sessions.GetInt64(ctx, sessionWorkspaceID); id != 0 {
		w, err := s.store.Workspace(ctx, user, id)
		if err == nil && !w.Archived() {
			return w, nil
		}
		if err != nil && !errors.Is(err, db.ErrNotFound) {
			return db.Workspace{}, err
		}
	}
	return s.store.DefaultWorkspace(ctx, user)
}

// build returns the shell for a page showing workspace ws.
func (s *shell) build(ctx context.Context, u db.User, ws db.Workspace, activeThread int64, title string) (views.Shell, error) {
	all, err := s.store.Workspaces(ctx, u.ID)
	if err != nil {
		return views.Shell{}, err
	}
	threads, next, err := s.store.SidebarThreads(ctx, u.ID, ws.ID, nil, sidebarPageSize)
	if err != nil {
		return views.Shell{}, err
	}
	rooms, err := s.store.MemberRooms(ctx, u.ID, sidebarRooms)
	if err != nil {
		return views.Shell{}, err
	}
	models := s.models.ChatModels(ctx)
	return views.Shell{
		Title: title, User: u, Workspace: ws, Workspaces: all, Threads: threads, Rooms: rooms,
		NextPage: sidebarPageURL(ws.ID, next), ActiveID: activeThread,
		Models: models, ModelWhere: s.where(models), Notice: s.models.Problem(ctx),
		Flash: s.sessions.PopString(ctx, sessionFlash),
	}, nil
}

// where labels each model with the servers it is on, when there are
// several; nil with one server.
func (s *shell) where(models []string) map[string]string {
	var out map[string]string
	for _, m := range models {
		if at := s.models.Where(m); len(at) > 0 {
			if out == nil {
				out = map[string]string{}
			}
			out[m] = strings.Join(at, ", ")
		}
	}
	return out
}

// page renders body as the main column of a signed-in page about the
// current workspace.
func (s *shell) page(w http.ResponseWriter, r *http.Request, status int, title string, body templ.Component) {
	u, _ := currentUser(r)
	ws, err := s.currentWorkspace(r, u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	sh, err := s.build(r.Context(), u, ws, 0, title)
	if err != nil {
		serverError(w, r, err)
		return
	}
	render(w, r, status, views.Page(title, views.App(sh, body)))
}

// defaultModel is the model a new thread in ws starts with.
func (s *shell) defaultModel(ctx context.Context, ws db.Workspace) string {
	if ws.DefaultModel != "" {
		return ws.DefaultModel
	}
	return s.models.Default(ctx)
}

func sidebarPageURL(ws int64, c *db.ThreadCursor) string {
	if c == nil {
		return ""
	}
	v := url.Values{}
	v.Set("pinned", strconv.FormatBool(c.Pinned))
	v.Set("at", strconv.FormatInt(c.Activity.UnixMicro(), 10))
	v.Set("id", strconv.FormatInt(c.ID, 10))
	return fmt.Sprintf("/w/%d/threads?%s", ws, v.Encode())
}

func parseCursor(q url.Values) (*db.ThreadCursor, error) {
	if q.Get("id") == "" {
		return nil, nil
	}
	pinned, err1 := strconv.ParseBool(q.Get("pinned"))
	at, err2 := strconv.ParseInt(q.Get("at"), 10, 64)
	id, err3 := strconv.ParseInt(q.Get("id"), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, fmt.Errorf("bad cursor")
	}
	return &db.ThreadCursor{Pinned: pinned, Activity: time.UnixMicro(at), ID: id}, nil
}

// sidebarPage serves GET /w/{id}/threads: the next page of the sidebar.
func (s *shell) sidebarPage(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	wsID, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	after, err := parseCursor(r.URL.Query())
	if err != nil {
		badRequest(w, r, "That page of threads does not exist.")
		return
	}
	ws, err := s.store.Workspace(r.Context(), u.ID, wsID)
	if err != nil {
		storeError(w, r, err)
		return
	}
	threads, next, err := s.store.SidebarThreads(r.Context(), u.ID, ws.ID, after, sidebarPageSize)
	if err != nil {
		serverError(w, r, err)
		return
	}
	render(w, r, http.StatusOK, views.ThreadItems(threads, -1, sidebarPageURL(ws.ID, next)))
}
