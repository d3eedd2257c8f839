package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/a-h/templ"

	"weft/chat"
	"weft/db"
	"weft/internal/usererr"
	"weft/media"
	"weft/views"
)

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
	return fmt.Sprintf("your files on this server would go over your storage limit of %s. Delete threads with files you no longer need, or documents from your knowledge bases, to make room.", media.ReadableSize(max))
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
