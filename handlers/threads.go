package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/a-h/templ"

	"weft/chat"
	"weft/db"
	"weft/media"
	"weft/views"
)

type threadStore interface {
	Thread(ctx context.Context, user, id int64) (db.Thread, error)
	ActiveRuns(ctx context.Context, user, thread int64) ([]db.Run, error)
	Message(ctx context.Context, user, id int64) (db.Message, error)
	RenameThread(ctx context.Context, user, id int64, title string) error
	SetThreadPinned(ctx context.Context, user, id int64, pinned bool) error
	SetThreadArchived(ctx context.Context, user, id int64, archived bool) error
	Roles(ctx context.Context, user int64) ([]db.Role, error)
	RoleByName(ctx context.Context, user int64, name string) (db.Role, error)
	ThreadUsage(ctx context.Context, user, thread int64) (db.UsageTotals, error)
	UpdateThreadSettings(ctx context.Context, user, thread int64, s db.ThreadSettings) error
	SetThreadModel(ctx context.Context, user, thread int64, model string) error
	SetThreadRole(ctx context.Context, user, thread int64, role *int64) error
	Workspace(ctx context.Context, user, id int64) (db.Workspace, error)
	KBs(ctx context.Context, user, workspace int64) ([]db.KnowledgeBase, error)
	ThreadKBs(ctx context.Context, user, thread int64) ([]db.KnowledgeBase, error)
	SetThreadKBs(ctx context.Context, user, thread int64, kbs []int64) error
	Attachments(ctx context.Context, user int64, msgs []int64) (map[int64][]db.Attachment, error)
	bodyStore
	AddImageRequest(ctx context.Context, user, thread int64, prompt, answer, engine string, maxPending int) (db.Sent, db.Media, error)
	ThreadShares(ctx context.Context, user, thread int64) ([]db.Share, error)
}

// attacher is the media service as the thread's actions use it.
type attacher interface {
	Limits() media.Limits
	ImagesEnabled(ctx context.Context) bool
	QueueImage(ctx context.Context, media int64) error
	MaxPending() int
	Release(ctx context.Context, shas []string)
}

// threads serves the thread page and the thread's actions.
type threads struct {
	store threadStore
	shell *shell
	home  *home
	media attacher
	rt    runtime
}

// show serves GET /t/{id} (?at=message: the branch through that message).
func (h *threads) show(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	at, _ := strconv.ParseInt(r.URL.Query().Get("at"), 10, 64)
	v, err := h.rt.ThreadView(r.Context(), u.ID, id, at)
	if err != nil {
		storeError(w, r, err)
		return
	}
	t, ws := v.Thread, v.Workspace
	s, err := h.shell.build(r.Context(), u, ws, t.ID, t.Title)
	if err != nil {
		serverError(w, r, err)
		return
	}
	lim := h.media.Limits()
	p := views.ThreadPage{Thread: t, Workspaces: s.Workspaces, Messages: messageViews(r.Context(), h.store, u.ID, v.Messages, s.Models),
		More: v.More, OtherBranch: v.OtherBranch, AwaitTitle: v.AwaitTitle, Roles: v.Roles, Usage: v.Usage,
		ImagesOn: h.media.ImagesEnabled(r.Context()),
		Tree:     threadTree(r.Context(), h.store, u.ID, t.ID),
		Composer: views.ComposerData{
			Action: fmt.Sprintf("/t/%d/messages", t.ID), WorkspaceID: ws.ID, Models: s.Models, ModelWhere: s.ModelWhere, Model: t.Model, Append: true,
			ThreadID: t.ID, Roles: v.Roles, RoleID: t.RoleID, KBs: v.KBs, Attached: kbIDs(v.Attached),
			MaxFiles: lim.MaxFiles, MaxFileBytes: lim.MaxFileBytes,
		}}
	if err := h.shell.agent.composer(r.Context(), u.ID, ws, &t, &p.Composer); err != nil {
		serverError(w, r, err)
		return
	}
	if p.Share, err = threadSharePanel(r.Context(), h.store, u.ID, t, v.OtherBranch != 0); err != nil {
		serverError(w, r, err)
		return
	}
	render(w, r, http.StatusOK, views.Page(threadTitleOr(t.Title), views.App(s, views.Thread(p))))
}

// history serves GET /t/{id}/history?before=message: the page of the path
// above a message, loaded when the reader scrolls up.
func (h *threads) history(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	before, err := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64)
	if err != nil {
		notFound(w, r)
		return
	}
	v, err := h.rt.History(r.Context(), u.ID, id, before)
	if err != nil {
		storeError(w, r, err)
		return
	}
	if len(v.Messages) == 0 {
		render(w, r, http.StatusOK, templ.NopComponent)
		return
	}
	render(w, r, http.StatusOK, views.HistoryPage(id, messageViews(r.Context(), h.store, u.ID, v.Messages, h.shell.models.ChatModels(r.Context())), v.More))
}

// messageViews is the views of items, final answers with their stored
// rendering (rendered and kept now when there is none).
func messageViews(ctx context.Context, s bodyStore, user int64, items []chat.MessageItem, models []string) []views.MessageView {
	out := make([]views.MessageView, len(items))
	for i, it := range items {
		out[i] = views.MessageView{MessageItem: it, Models: models}
	}
	fillBodies(ctx, s, user, out)
	fillCommands(ctx, s, user, out)
	fillTree(ctx, s, user, out)
	return out
}

// title serves GET /t/{id}/title: it waits (a little) for the generated
// title and swaps it into the sidebar and the header.
func (h *threads) title(w http.ResponseWriter, r *http.Request) {
	// Ownership first: a waiter is registered only for the user's own
	// thread, and released when this request ends.
	u, t, ok := pathThread(w, r, h.store)
	if !ok {
		return
	}
	if t.TitleState == "provisional" {
		changed, release := h.rt.TitleChanged(t.ID)
		defer release()
		var err error
		// Read again after registering: a title stored in between is not missed.
		if t, err = h.store.Thread(r.Context(), u.ID, t.ID); err != nil {
			storeError(w, r, err)
			return
		}
		if t.TitleState == "provisional" {
			wait := time.NewTimer(titleWait)
			defer wait.Stop()
			select {
			case <-changed:
			case <-wait.C:
			case <-r.Context().Done():
				return
			}
			if t, err = h.store.Thread(r.Context(), u.ID, t.ID); err != nil {
				storeError(w, r, err)
				return
			}
		}
	}
	render(w, r, http.StatusOK, views.TitleUpdate(t))
}

// titleWait is how long GET /t/{id}/title waits for a generated title.
const titleWait = 25 * time.Second

// threadReader reads one of a user's threads.
type threadReader interface {
	Thread(ctx context.Context, user, id int64) (db.Thread, error)
}

// pathThread is the signed-in user's thread named by the path's {id}; it
// answers the request itself (404, or the store's error) when there is none.
func pathThread(w http.ResponseWriter, r *http.Request, s threadReader) (db.User, db.Thread, bool) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return u, db.Thread{}, false
	}
	t, err := s.Thread(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return u, db.Thread{}, false
	}
	return u, t, true
}

func threadTitleOr(t string) string {
	if t == "" {
		return "Untitled"
	}
	return t
}

func kbIDs(kbs []db.KnowledgeBase) map[int64]bool {
	m := make(map[int64]bool, len(kbs))
	for _, kb := range kbs {
		m[kb.ID] = true
	}
	return m
}
