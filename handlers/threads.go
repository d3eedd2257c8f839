package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a-h/templ"

	"weft/chat"
	"weft/db"
	"weft/internal/usererr"
	"weft/media"
	"weft/views"
)

// pathPageSize is how many messages of the active path a thread page shows.
const pathPageSize = 100

type threadStore interface {
	Thread(ctx context.Context, user, id int64) (db.Thread, error)
	ActivePath(ctx context.Context, user, thread int64, limit int) ([]db.Message, bool, error)
	ActiveRuns(ctx context.Context, user, thread int64) ([]db.Run, error)
	PathTo(ctx context.Context, user, message int64, limit int) ([]db.Message, bool, error)
	Message(ctx context.Context, user, id int64) (db.Message, error)
	NewestLeafUnder(ctx context.Context, user, message int64) (int64, int64, error)
	Branches(ctx context.Context, user, thread int64, msgs []db.Message) (map[int64]db.Branch, error)
	RenameThread(ctx context.Context, user, id int64, title string) error
	SetThreadPinned(ctx context.Context, user, id int64, pinned bool) error
	SetThreadArchived(ctx context.Context, user, id int64, archived bool) error
	Roles(ctx context.Context, user int64) ([]db.Role, error)
	RoleByName(ctx context.Context, user int64, name string) (db.Role, error)
	Compactions(ctx context.Context, user, thread int64, under []int64) ([]db.Message, error)
	ThreadUsage(ctx context.Context, user, thread int64) (db.UsageTotals, error)
	UpdateThreadSettings(ctx context.Context, user, thread int64, s db.ThreadSettings) error
	SetThreadModel(ctx context.Context, user, thread int64, model string) error
	SetThreadRole(ctx context.Context, user, thread int64, role *int64) error
	Workspace(ctx context.Context, user, id int64) (db.Workspace, error)
	KBs(ctx context.Context, user, workspace int64) ([]db.KnowledgeBase, error)
	ThreadKBs(ctx context.Context, user, thread int64) ([]db.KnowledgeBase, error)
	SetThreadKBs(ctx context.Context, user, thread int64, kbs []int64) error
	StepsOfMessages(ctx context.Context, user int64, msgs []int64) (map[int64]db.RunSteps, error)
	Attachments(ctx context.Context, user int64, msgs []int64) (map[int64][]db.Attachment, error)
	MediaOf(ctx context.Context, user int64, msgs []int64) (map[int64][]db.Media, error)
	bodyStore
	MediaByID(ctx context.Context, user, id int64) (db.Media, error)
	StorageUse(ctx context.Context, user int64, shas []string) (int64, map[string]bool, error)
	AddImageRequest(ctx context.Context, user, thread int64, prompt, answer, engine string, maxPending int) (db.Sent, db.Media, error)
}

// attacher stores the composer's files and queues media.
type attacher interface {
	Prepare(ctx context.Context, files []media.Upload) ([]media.Prepared, error)
	Store(files []media.Prepared) ([]db.NewAttachment, error)
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
	// maxBytes is what one user may store (attachments and knowledge-base
	// files); WEFT_USER_MAX_BYTES.
	maxBytes int64
}

func (h *threads) show(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	t, err := h.store.Thread(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	ws, err := h.shell.store.Workspace(r.Context(), u.ID, t.WorkspaceID)
	if err != nil {
		storeError(w, r, err)
		return
	}
	msgs, more, viewLeaf, err := h.path(r, u.ID, t.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	s, err := h.shell.build(r.Context(), u, ws, t.ID, t.Title)
	if err != nil {
		serverError(w, r, err)
		return
	}
	items, err := h.messageViews(r.Context(), u.ID, t, msgs, s.Models)
	if err != nil {
		serverError(w, r, err)
		return
	}
	roles, err := h.store.Roles(r.Context(), u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	usage, err := h.store.ThreadUsage(r.Context(), u.ID, t.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	kbs, err := h.store.KBs(r.Context(), u.ID, ws.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	attached, err := h.store.ThreadKBs(r.Context(), u.ID, t.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	p := views.ThreadPage{Thread: t, Workspaces: s.Workspaces, Messages: items, More: more, OtherBranch: viewLeaf,
		AwaitTitle: t.TitleState == "provisional" && hasAnswer(items), Roles: roles, Usage: usage,
		Composer: views.ComposerData{
			Action: fmt.Sprintf("/t/%d/messages", t.ID), WorkspaceID: ws.ID, Models: s.Models, Model: t.Model, Append: true,
			ThreadID: t.ID, Roles: roles, RoleID: t.RoleID, KBs: kbs, Attached: kbIDs(attached),
		}}
	if err := h.shell.agent.composer(r.Context(), u.ID, ws, &t, &p.Composer); err != nil {
		serverError(w, r, err)
		return
	}
	lim := h.media.Limits()
	p.Composer.MaxFiles, p.Composer.MaxFileBytes = lim.MaxFiles, lim.MaxFileBytes
	p.ImagesOn = h.media.ImagesEnabled(r.Context())
	render(w, r, http.StatusOK, views.Page(threadTitleOr(t.Title), views.App(s, views.Thread(p))))
}

// create serves POST /t: the first message of a new thread.
func (h *threads) create(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	wsID, err := strconv.ParseInt(r.PostForm.Get("workspace_id"), 10, 64)
	if err != nil {
		badRequest(w, r, "Choose a workspace for the new thread.")
		return
	}
	in := chat.Input{WorkspaceID: wsID}
	if from := r.PostForm.Get("from"); from != "" {
		if in.From, err = strconv.ParseInt(from, 10, 64); err != nil {
			badRequest(w, r, "The thread to copy settings from does not exist.")
			return
		}
	}
	h.send(w, r, in)
}

// append serves POST /t/{id}/messages.
func (h *threads) append(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	h.send(w, r, chat.Input{ThreadID: id})
}

// send takes the composer's text: a slash command, or a message to answer.
func (h *threads) send(w http.ResponseWriter, r *http.Request, in chat.Input) {
	u, _ := currentUser(r)
	in.Content = r.PostForm.Get("content")
	if cmd, ok := parseCommand(in.Content); ok {
		if hasFiles(r) {
			h.refuse(w, r, in, "Commands take no files: send the files with a message instead.")
			return
		}
		h.command(w, r, u, in, cmd)
		return
	}
	in.Content = unescapeSlash(in.Content)
	in.Model = strings.TrimSpace(r.PostForm.Get("model"))
	if len(in.Model) > 200 {
		h.refuse(w, r, in, "That model name is too long.")
		return
	}
	if r.PostForm.Has("kb_present") {
		kbs, ok := formIDs(w, r, "kb")
		if !ok {
			return
		}
		in.SetKBs, in.KBs = true, kbs
	}
	if !h.attach(w, r, u, &in) {
		return
	}
	if r.PostForm.Has("agent_present") {
		in.SetAgent, in.Agent = true, r.PostForm.Get("agent") == "on"
	}
	if r.PostForm.Has("role") {
		in.SetRole = true
		if v := r.PostForm.Get("role"); v != "" {
			role, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				h.refuse(w, r, in, "That role does not exist.")
				return
			}
			in.RoleID = &role
		}
	}
	sent, err := h.rt.Send(r.Context(), u.ID, in)
	switch {
	case errors.Is(err, chat.ErrEmpty), errors.Is(err, chat.ErrTooLong):
		h.refuse(w, r, in, "Message not sent: "+usererr.Or(err, "it could not be read")+".")
		return
	case errors.Is(err, db.ErrNotFound) && in.RoleID != nil:
		h.refuse(w, r, in, "Message not sent: that role does not exist any more. Choose another one.")
		return
	case errors.Is(err, db.ErrNotFound) && len(in.KBs) > 0:
		h.refuse(w, r, in, "Message not sent: a chosen knowledge base does not exist any more (reload the page).")
		return
	case errors.Is(err, db.ErrNotFound) && len(in.Media) > 0:
		h.refuse(w, r, in, "Message not sent: an attached image does not exist any more (reload the page).")
		return
	case err != nil:
		storeError(w, r, err)
		return
	}
	if sent.Created {
		slog.InfoContext(r.Context(), "thread created", "thread", sent.Thread.ID)
	}
	if isHTMX(r) && !sent.Created {
		// The composer appends the user message and the answer placeholder.
		run := sent.Run
		files, err := h.store.Attachments(r.Context(), u.ID, []int64{sent.User.ID})
		if err != nil {
			serverError(w, r, err)
			return
		}
		render(w, r, http.StatusOK, templ.Join(
			views.MessageItem(views.MessageView{MessageItem: chat.MessageItem{Message: sent.User, Attachments: files[sent.User.ID]}}),
			views.MessageItem(views.MessageView{MessageItem: chat.MessageItem{Message: sent.Assistant, Run: &run}}),
		))
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d#m%d", sent.Thread.ID, sent.Assistant.ID))
}

// refuse answers a send that was not accepted, keeping what was typed: in
// the composer's notice area (htmx), on the new-thread page with the text
// filled in again, or on an error page.
func (h *threads) refuse(w http.ResponseWriter, r *http.Request, in chat.Input, msg string) {
	if isHTMX(r) {
		composerNotice(w, r, http.StatusUnprocessableEntity, views.ComposerNotice(msg, true))
		return
	}
	if in.ThreadID == 0 {
		u, _ := currentUser(r)
		ws, err := h.store.Workspace(r.Context(), u.ID, in.WorkspaceID)
		if err != nil {
			storeError(w, r, err)
			return
		}
		h.home.render(w, r, http.StatusUnprocessableEntity, u, ws, views.ComposerData{
			Model: r.PostForm.Get("model"), From: in.From, Content: in.Content, Error: msg, RoleID: in.RoleID})
		return
	}
	badRequest(w, r, msg)
}

// composerNotice swaps c into the composer's notice area instead of the
// element the composer targets. A 422 keeps the typed text (htmx does not
// count it as a success, so the composer is not cleared).
func composerNotice(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	w.Header().Set("HX-Retarget", "#composer-notice")
	w.Header().Set("HX-Reswap", "innerHTML")
	render(w, r, status, c)
}

// title serves GET /t/{id}/title: it waits (a little) for the generated
// title and swaps it into the sidebar and the header.
func (h *threads) title(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	// Ownership first: a waiter is registered only for the user's own
	// thread, and released when this request ends.
	t, err := h.store.Thread(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	if t.TitleState == "provisional" {
		changed, release := h.rt.TitleChanged(id)
		defer release()
		// Read again after registering: a title stored in between is not missed.
		if t, err = h.store.Thread(r.Context(), u.ID, id); err != nil {
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
			if t, err = h.store.Thread(r.Context(), u.ID, id); err != nil {
				storeError(w, r, err)
				return
			}
		}
	}
	render(w, r, http.StatusOK, views.TitleUpdate(t))
}

// titleWait is how long GET /t/{id}/title waits for a generated title.
const titleWait = 25 * time.Second

// path is the last page of the branch the thread page shows: the saved
// active branch, or (with ?at=message, from a search result) the branch
// through that message, shown without changing the saved one. otherLeaf is
// that branch's leaf when it is not the saved one (0 otherwise).
func (h *threads) path(r *http.Request, user, thread int64) (msgs []db.Message, more bool, otherLeaf int64, err error) {
	if at, err := strconv.ParseInt(r.URL.Query().Get("at"), 10, 64); err == nil && at > 0 {
		leaf, th, err := h.store.NewestLeafUnder(r.Context(), user, at)
		if err == nil && th == thread {
			msgs, more, err = h.store.PathTo(r.Context(), user, leaf, pathPageSize)
			if t, terr := h.store.Thread(r.Context(), user, thread); terr == nil && (t.ActiveLeafID == nil || *t.ActiveLeafID != leaf) {
				otherLeaf = leaf
			}
			return msgs, more, otherLeaf, err
		}
	}
	msgs, more, err = h.store.ActivePath(r.Context(), user, thread, pathPageSize)
	return msgs, more, 0, err
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
	m, err := h.store.Message(r.Context(), u.ID, before)
	if err != nil || m.ThreadID != id {
		notFound(w, r)
		return
	}
	if m.ParentID == nil {
		render(w, r, http.StatusOK, templ.NopComponent)
		return
	}
	msgs, more, err := h.store.PathTo(r.Context(), u.ID, *m.ParentID, pathPageSize)
	if err != nil {
		serverError(w, r, err)
		return
	}
	t, err := h.store.Thread(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	items, err := h.messageViews(r.Context(), u.ID, t, msgs, h.shell.models.ChatModels(r.Context()))
	if err != nil {
		serverError(w, r, err)
		return
	}
	render(w, r, http.StatusOK, views.HistoryPage(id, items, more))
}

// hasAnswer reports whether a complete answer is shown (then a generated
// title may be on its way).
func hasAnswer(items []views.MessageView) bool {
	for _, v := range items {
		if v.Message.Role == "assistant" && v.Message.Status == db.MsgComplete {
			return true
		}
	}
	return false
}

// messageViews reads msgs' items from one snapshot and gives final answers
// their stored rendering.
func (h *threads) messageViews(ctx context.Context, user int64, t db.Thread, msgs []db.Message, models []string) ([]views.MessageView, error) {
	items, err := h.rt.MessageItems(ctx, user, t, msgs)
	if err != nil {
		return nil, err
	}
	out := make([]views.MessageView, len(items))
	for i, it := range items {
		out[i] = views.MessageView{MessageItem: it, Models: models}
	}
	fillBodies(ctx, h.store, user, out)
	return out, nil
}

func (h *threads) rename(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	title := strings.Join(strings.Fields(r.PostForm.Get("title")), " ")
	if title == "" || utf8.RuneCountInString(title) > 200 {
		badRequest(w, r, "A title needs 1 to 200 characters.")
		return
	}
	if err := h.store.RenameThread(r.Context(), u.ID, id, title); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d", id))
}

func (h *threads) pin(w http.ResponseWriter, r *http.Request) {
	h.toggle(w, r, "pinned", h.store.SetThreadPinned)
}

func (h *threads) archive(w http.ResponseWriter, r *http.Request) {
	h.toggle(w, r, "archived", h.store.SetThreadArchived)
}

// toggle handles the boolean thread actions (pin, archive).
func (h *threads) toggle(w http.ResponseWriter, r *http.Request, field string, set func(context.Context, int64, int64, bool) error) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	v, ok := formBool(r, field)
	if !ok {
		badRequest(w, r, "Say "+field+"=true or "+field+"=false.")
		return
	}
	if err := set(r.Context(), u.ID, id, v); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d", id))
}

// delete removes the thread with its messages, runs and files; the
// runtime stops its runs first.
func (h *threads) delete(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	released, err := h.rt.DeleteThread(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	slog.InfoContext(r.Context(), "thread deleted", "thread", id, "released_blobs", len(released))
	h.media.Release(r.Context(), released)
	redirect(w, r, "/")
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

// attach reads the composer's files and attached media into in; it answers
// the request itself (keeping the typed text) when they are refused.
func (h *threads) attach(w http.ResponseWriter, r *http.Request, u db.User, in *chat.Input) bool {
	lim := h.media.Limits()
	uploads, err := readUploads(r, lim.MaxFileBytes)
	if err != nil {
		h.refuse(w, r, *in, "Message not sent: the attached files could not be read; try again.")
		return false
	}
	images := 0
	for _, v := range r.PostForm["media"] {
		id, err := strconv.ParseInt(v, 10, 64)
		var md db.Media
		if err == nil {
			md, err = h.store.MediaByID(r.Context(), u.ID, id)
		}
		if err != nil || md.Kind != db.MediaImage || md.Status != db.MediaReady {
			h.refuse(w, r, *in, "Message not sent: an attached image does not exist (only generated images can be attached).")
			return false
		}
		in.Media = append(in.Media, id)
		images++
	}
	if n := len(uploads) + len(in.Media); n > lim.MaxFiles {
		h.refuse(w, r, *in, fmt.Sprintf("Message not sent: %d files; at most %d a message.", n, lim.MaxFiles))
		return false
	}
	if len(uploads) == 0 && images == 0 {
		return true
	}
	// Everything that can refuse the message is decided before a file is
	// written: the thread (or workspace) is the user's, the files are
	// acceptable, the model sees images, the user has room.
	model := in.Model
	if in.ThreadID != 0 {
		t, err := h.store.Thread(r.Context(), u.ID, in.ThreadID)
		if err != nil {
			storeError(w, r, err)
			return false
		}
		if model == "" {
			model = t.Model
		}
	} else if _, err := h.store.Workspace(r.Context(), u.ID, in.WorkspaceID); err != nil {
		storeError(w, r, err)
		return false
	}
	if model == "" {
		model = h.shell.models.Default(r.Context())
	}
	prepared, err := h.media.Prepare(r.Context(), uploads)
	if msg, ok := usererr.Message(err); ok && errors.Is(err, media.ErrRefused) {
		h.refuse(w, r, *in, "Message not sent: "+msg)
		return false
	}
	if err != nil {
		serverError(w, r, err)
		return false
	}
	for _, p := range prepared {
		if p.Attachment.Kind == db.AttachImage {
			images++
		}
	}
	if images > 0 && !h.sees(r.Context(), model) {
		h.refuse(w, r, *in, fmt.Sprintf("Message not sent: the model %s cannot see images. Choose a model with vision (such as llava or a gemma3 model), or send the image without it.", model))
		return false
	}
	if ok, err := h.hasRoom(r.Context(), u.ID, prepared); err != nil {
		serverError(w, r, err)
		return false
	} else if !ok {
		h.refuse(w, r, *in, "Message not sent: "+storageLimitMessage(h.maxBytes))
		return false
	}
	files, err := h.media.Store(prepared)
	if err != nil {
		serverError(w, r, err)
		return false
	}
	in.Attachments = files
	return true
}

// hasRoom reports whether the user may store the prepared files: what they
// store, plus the files their attachments do not hold yet, stays within the
// limit. Checked before writing, not under a lock: concurrent sends of one
// user may pass the limit by what they carry (each message is capped).
func (h *threads) hasRoom(ctx context.Context, user int64, files []media.Prepared) (bool, error) {
	shas := make([]string, len(files))
	for i, p := range files {
		shas[i] = p.Attachment.SHA256
	}
	used, held, err := h.store.StorageUse(ctx, user, shas)
	if err != nil {
		return false, err
	}
	for _, p := range files {
		if !held[p.Attachment.SHA256] {
			held[p.Attachment.SHA256] = true
			used += p.Attachment.Size
		}
	}
	return used <= h.maxBytes, nil
}

// storageLimitMessage says why a file was not stored.
func storageLimitMessage(max int64) string {
	return db.StorageLimitMessage(max)
}

// sees reports whether a model takes images.
func (h *threads) sees(ctx context.Context, model string) bool {
	has, _ := h.shell.agent.models.Supports(ctx, model, "vision")
	return has
}

// hasFiles reports whether the composer sent files or attached media.
func hasFiles(r *http.Request) bool {
	if len(r.PostForm["media"]) > 0 {
		return true
	}
	if r.MultipartForm == nil {
		return false
	}
	for _, fh := range r.MultipartForm.File["files"] {
		if fh.Filename != "" || fh.Size > 0 {
			return true
		}
	}
	return false
}
