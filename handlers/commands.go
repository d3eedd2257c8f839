package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/a-h/templ"

	"weft/chat"
	"weft/db"
	"weft/internal/usererr"
	"weft/views"
)

// command is a slash command typed into the composer.
type command struct {
	name string // "/model", lower case
	arg  string
}

// parseCommand recognises a slash command. A message starting with "//" is
// not one: it is sent with one slash less (unescapeSlash).
func parseCommand(content string) (command, bool) {
	s := strings.TrimSpace(content)
	if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") {
		return command{}, false
	}
	name, arg, _ := strings.Cut(s, " ")
	if i := strings.IndexAny(name, "\n\t"); i >= 0 {
		name, arg = name[:i], name[i+1:]+" "+arg
	}
	return command{name: strings.ToLower(name), arg: strings.TrimSpace(arg)}, true
}

// unescapeSlash turns a leading "//" into "/": the way to send a message
// that starts with a slash.
func unescapeSlash(content string) string {
	s := strings.TrimLeft(content, " \t\r\n")
	if strings.HasPrefix(s, "//") {
		return s[1:]
	}
	return content
}

// command runs a slash command. Its outcome shows in the composer's notice
// area, or (when the page has to change: another model, role, a summary, a
// new answer) on the reloaded thread page.
func (h *threads) command(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, c command) {
	// The command and its reply are kept as a command entry of the thread.
	r, rep := withCmdReply(r)
	defer h.keepCommand(r, u.ID, in.ThreadID, strings.TrimSpace(c.name+" "+c.arg), rep)()
	h.runCommand(w, r, u, in, c)
}

func (h *threads) runCommand(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, c command) {
	ctx := r.Context()
	if c.name == "/" || c.name == "/help" {
		h.notice(w, r, in, commandHelp(in.ThreadID != 0))
		return
	}
	if !isCommand(c.name) {
		h.refuse(w, r, in, fmt.Sprintf("Unknown command %s. %s", c.name, commandHelp(in.ThreadID != 0)))
		return
	}
	if in.ThreadID == 0 {
		h.refuse(w, r, in, c.name+" works inside a thread. Send a first message to start one (choose its model and role below).")
		return
	}
	t, err := h.store.Thread(ctx, u.ID, in.ThreadID)
	if err != nil {
		storeError(w, r, err)
		return
	}
	switch c.name {
	case "/new":
		redirect(w, r, fmt.Sprintf("/?w=%d&from=%d", t.WorkspaceID, t.ID))
	case "/model":
		h.cmdModel(w, r, u, in, t, c.arg)
	case "/role":
		h.cmdRole(w, r, u, in, t, c.arg)
	case "/title":
		title := strings.Join(strings.Fields(c.arg), " ")
		if title == "" || utf8.RuneCountInString(title) > 200 {
			h.refuse(w, r, in, "Write the new title after the command, for example: /title Trip to Lisbon (at most 200 characters).")
			return
		}
		if err := h.store.RenameThread(ctx, u.ID, t.ID, title); err != nil {
			storeError(w, r, err)
			return
		}
		t.Title = title
		h.notice(w, r, in, "Renamed the thread to “"+title+"”.", views.TitleUpdate(t))
	case "/compact":
		h.cmdCompact(w, r, u, in, t)
	case "/usage":
		h.cmdUsage(w, r, u, in, t)
	case "/stop":
		h.cmdStop(w, r, u, in, t)
	case "/steer":
		h.cmdSteer(w, r, u, in, t, c.arg)
	case "/queue":
		h.cmdQueue(w, r, u, in, t, c.arg)
	case "/status":
		h.cmdStatus(w, r, u, in, t)
	case "/clear":
		h.cmdClear(w, r, u, in, t)
	case "/temporary":
		h.cmdTemporary(w, r, u, in, t, c.arg)
	case "/goal":
		h.cmdGoal(w, r, u, in, t, c.arg)
	case "/retry":
		h.cmdRetry(w, r, u, in, t)
	case "/label":
		h.cmdLabel(w, r, u, in, t, c.arg)
	case "/image":
		h.cmdImage(w, r, u, in, t, c.arg)
	}
}

// cmdImage generates an image from a prompt: the prompt is stored as a user
// message, the image as media on the answer below it.
func (h *threads) cmdImage(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, t db.Thread, prompt string) {
	if !h.media.ImagesEnabled(r.Context()) {
		h.refuse(w, r, in, "Image generation is not configured on this server (an admin sets it up on /admin).")
		return
	}
	prompt = strings.TrimSpace(prompt)
	if prompt == "" || utf8.RuneCountInString(prompt) > 4000 {
		h.refuse(w, r, in, "Describe the image after the command, for example: /image a lighthouse at dawn (at most 4,000 characters).")
		return
	}
	sent, md, err := h.store.AddImageRequest(r.Context(), u.ID, t.ID, prompt, "Image: "+prompt, "openai", h.media.MaxPending())
	if errors.Is(err, db.ErrMediaLimit) {
		h.refuse(w, r, in, mediaLimitMessage(h.media.MaxPending()))
		return
	}
	if err != nil {
		storeError(w, r, err)
		return
	}
	if err := h.media.QueueImage(r.Context(), md.ID); err != nil {
		serverError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d#m%d", t.ID, sent.Assistant.ID))
}

func isCommand(name string) bool {
	for _, c := range views.Commands {
		if c.Name == name {
			return true
		}
	}
	return false
}

func commandHelp(inThread bool) string {
	var names []string
	for _, c := range views.Commands {
		if inThread || !c.InThread {
			names = append(names, c.Name)
		}
	}
	return "Commands: " + strings.Join(names, ", ") + ". Start with // to send a message that begins with a slash."
}

// notice shows a command's outcome: in the notice area (htmx; extra
// components are swapped out of band), else on the reloaded page.
func (h *threads) notice(w http.ResponseWriter, r *http.Request, in chat.Input, msg string, extra ...templ.Component) {
	noteReply(r, msg, false)
	if isHTMX(r) {
		composerNotice(w, r, http.StatusOK, templ.Join(append([]templ.Component{views.ComposerNotice(msg, false)}, extra...)...))
		return
	}
	h.flashTo(w, r, in, msg)
}

// flashTo reloads the composer's page with msg as its flash.
func (h *threads) flashTo(w http.ResponseWriter, r *http.Request, in chat.Input, msg string) {
	noteReply(r, msg, false)
	h.shell.sessions.Put(r.Context(), sessionFlash, msg)
	if in.ThreadID != 0 {
		redirect(w, r, fmt.Sprintf("/t/%d", in.ThreadID))
		return
	}
	redirect(w, r, fmt.Sprintf("/?w=%d", in.WorkspaceID))
}

func (h *threads) cmdModel(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, t db.Thread, arg string) {
	models := h.shell.models.ChatModels(r.Context())
	if arg == "" {
		h.notice(w, r, in, fmt.Sprintf("This thread answers with %s. Available: %s.", orNone(t.Model), orNone(strings.Join(models, ", "))))
		return
	}
	name := ""
	for _, m := range models {
		if strings.EqualFold(m, arg) || strings.EqualFold(strings.TrimSuffix(m, ":latest"), arg) {
			name = m
		}
	}
	if name == "" {
		h.refuse(w, r, in, fmt.Sprintf("There is no model %q on the Ollama server. Available: %s.", arg, orNone(strings.Join(models, ", "))))
		return
	}
	if err := h.store.SetThreadModel(r.Context(), u.ID, t.ID, name); err != nil {
		storeError(w, r, err)
		return
	}
	h.flashTo(w, r, in, "This thread now answers with "+name+".")
}

func (h *threads) cmdRole(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, t db.Thread, arg string) {
	roles, err := h.store.Roles(r.Context(), u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	var names []string
	current := "no role"
	for _, ro := range roles {
		names = append(names, ro.Name)
		if t.RoleID != nil && *t.RoleID == ro.ID {
			current = "the role " + ro.Name
		}
	}
	list := orNone(strings.Join(names, ", "))
	switch {
	case arg == "":
		h.notice(w, r, in, fmt.Sprintf("This thread uses %s. Your roles: %s. /role none removes it.", current, list))
		return
	case strings.EqualFold(arg, "none"):
		if err := h.store.SetThreadRole(r.Context(), u.ID, t.ID, nil); err != nil {
			storeError(w, r, err)
			return
		}
		h.flashTo(w, r, in, "This thread no longer uses a role.")
		return
	}
	role, err := h.store.RoleByName(r.Context(), u.ID, arg)
	if errors.Is(err, db.ErrNotFound) {
		h.refuse(w, r, in, fmt.Sprintf("You have no role named %q. Your roles: %s. Create roles on the Roles page.", arg, list))
		return
	}
	if err == nil {
		err = h.store.SetThreadRole(r.Context(), u.ID, t.ID, &role.ID)
	}
	if err != nil {
		storeError(w, r, err)
		return
	}
	h.flashTo(w, r, in, "This thread now uses the role "+role.Name+".")
}

func (h *threads) cmdCompact(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, t db.Thread) {
	// A summary takes as long as the model needs to write it.
	_ = http.NewResponseController(w).SetWriteDeadline(timeNow().Add(compactTimeout))
	m, err := h.rt.Compact(r.Context(), u.ID, t.ID)
	switch {
	case errors.Is(err, chat.ErrNothingToCompact), errors.Is(err, chat.ErrCompactionOff), errors.Is(err, chat.ErrCompactionFailed):
		h.refuse(w, r, in, usererr.Capitalize(usererr.Or(err, "the summary could not be written"))+".")
		return
	case errors.Is(err, chat.ErrNoModel):
		h.refuse(w, r, in, "No model is chosen for this thread. Pick one first (/model NAME).")
		return
	case err != nil:
		storeError(w, r, err)
		return
	}
	h.flashTo(w, r, in, fmt.Sprintf("Summarized %d earlier messages. They stay in the thread; the model now receives the summary instead.", views.Covers(m)))
}

func (h *threads) cmdUsage(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, t db.Thread) {
	usage, err := h.store.ThreadUsage(r.Context(), u.ID, t.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	g, err := h.rt.ContextGauge(r.Context(), u.ID, t.ID)
	if err != nil {
		storeError(w, r, err)
		return
	}
	msg := fmt.Sprintf("This thread: %d answers, %d prompt tokens, %d output tokens. Next message: about %d of %d context tokens (%d%%).",
		usage.Answers, usage.PromptTokens, usage.OutputTokens, g.Estimate, g.NumCtx, percentOf(g.Estimate, g.NumCtx))
	if g.Summarized {
		msg += " Older turns are summarized."
	}
	h.notice(w, r, in, msg)
}

func (h *threads) cmdStop(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, t db.Thread) {
	active, err := h.store.ActiveRuns(r.Context(), u.ID, t.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	if len(active) == 0 {
		h.notice(w, r, in, "Nothing is being written in this thread.")
		return
	}
	for _, run := range active {
		if _, err := h.rt.Cancel(r.Context(), u.ID, run.ID); err != nil && !errors.Is(err, db.ErrNotFound) {
			serverError(w, r, err)
			return
		}
	}
	h.notice(w, r, in, "Stopped.")
}

func (h *threads) cmdRetry(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, t db.Thread) {
	if t.ActiveLeafID == nil {
		h.refuse(w, r, in, "There is no answer to retry yet.")
		return
	}
	leaf, err := h.store.Message(r.Context(), u.ID, *t.ActiveLeafID)
	if err != nil {
		storeError(w, r, err)
		return
	}
	switch {
	case leaf.Role != "assistant":
		h.refuse(w, r, in, "There is no answer to retry yet.")
		return
	case leaf.Status == db.MsgStreaming:
		h.refuse(w, r, in, "The answer is still being written. Stop it first (/stop).")
		return
	}
	sent, err := h.rt.Retry(r.Context(), u.ID, leaf.ID, "")
	if err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d#m%d", t.ID, sent.Assistant.ID))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func percentOf(n, of int) int {
	if of <= 0 {
		return 0
	}
	return n * 100 / of
}
