package handlers

import (
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
	if !h.readInput(w, r, &in) {
		return
	}
	sent, err := h.rt.Send(r.Context(), u.ID, in)
	switch {
	case errors.Is(err, chat.ErrEmpty), errors.Is(err, chat.ErrTooLong):
		h.refuse(w, r, in, "Message not sent: "+usererr.Or(err, "it could not be read")+".")
		return
	case errors.Is(err, chat.ErrRefused):
		h.refuse(w, r, in, usererr.Or(err, "Message not sent."))
		return
	case err != nil:
		storeError(w, r, err)
		return
	}
	if sent.Created {
		slog.InfoContext(r.Context(), "thread created", "thread", sent.Thread.ID)
	}
	if isHTMX(r) && !sent.Created {
		h.sentItems(w, r, u.ID, sent)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d#m%d", sent.Thread.ID, sent.Assistant.ID))
}

// readInput reads the composer's fields beyond the text into in: the
// model, knowledge bases, files, attached images, agent mode and role. It
// answers the request itself (keeping the typed text) when one cannot be
// read.
func (h *threads) readInput(w http.ResponseWriter, r *http.Request, in *chat.Input) bool {
	in.Model = strings.TrimSpace(r.PostForm.Get("model"))
	if len(in.Model) > 200 {
		h.refuse(w, r, *in, "That model name is too long.")
		return false
	}
	if r.PostForm.Has("kb_present") {
		kbs, ok := formIDs(w, r, "kb")
		if !ok {
			return false
		}
		in.SetKBs, in.KBs = true, kbs
	}
	var err error
	if in.Files, err = readUploads(r, h.media.Limits().MaxFileBytes); err != nil {
		h.refuse(w, r, *in, "Message not sent: the attached files could not be read; try again.")
		return false
	}
	for _, v := range r.PostForm["media"] {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			h.refuse(w, r, *in, usererr.Or(chat.ErrNoSuchImage, ""))
			return false
		}
		in.Media = append(in.Media, id)
	}
	if r.PostForm.Has("agent_present") {
		in.SetAgent, in.Agent = true, r.PostForm.Get("agent") == "on"
	}
	if r.PostForm.Has("web_present") {
		// While no search service is set up the switch stays off,
		// whatever the form says.
		in.SetWeb, in.Web = true, r.PostForm.Get("web") == "on" && h.shell.agent.web.WebSearchUnavailable() == ""
	}
	if r.PostForm.Has("role") {
		in.SetRole = true
		if v := r.PostForm.Get("role"); v != "" {
			role, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				h.refuse(w, r, *in, "That role does not exist.")
				return false
			}
			in.RoleID = &role
		}
	}
	return true
}

// sentItems answers an htmx send into a thread: the composer appends the
// user message and the answer placeholder.
func (h *threads) sentItems(w http.ResponseWriter, r *http.Request, user int64, sent db.Sent) {
	files, err := h.store.Attachments(r.Context(), user, []int64{sent.User.ID})
	if err != nil {
		serverError(w, r, err)
		return
	}
	run := sent.Run
	render(w, r, http.StatusOK, templ.Join(
		views.MessageItem(views.MessageView{MessageItem: chat.MessageItem{Message: sent.User, Attachments: files[sent.User.ID]}}),
		views.MessageItem(views.MessageView{MessageItem: chat.MessageItem{Message: sent.Assistant, Run: &run}}),
	))
}

// refuse answers a send that was not accepted, keeping what was typed: in
// the composer's notice area (htmx), on the new-thread page with the text
// filled in again, or on an error page.
func (h *threads) refuse(w http.ResponseWriter, r *http.Request, in chat.Input, msg string) {
	noteReply(r, msg, true)
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
