package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/a-h/templ"

	"weft/chat"
	"weft/db"
	"weft/mcp"
	"weft/views"
)

type settingsStore interface {
	Setting(ctx context.Context, key, def string) (string, error)
	SetSetting(ctx context.Context, key, value string) error
}

// admin serves /admin: instance settings, for administrators only.
type admin struct {
	store settingsStore
	shell *shell
	media mediaService
	// servers describes the model servers when there are several (nil
	// with one).
	servers func() []chat.ServerStatus
	// mcp is the MCP servers (nil: WEFT_MCP_CONFIG is not set).
	mcp MCPServers
	// web is the search service of web search (issue 19).
	web webSearchAdmin
}

// MCPServers is the MCP servers as /admin shows and reloads them
// (implemented by mcp.Manager).
type MCPServers interface {
	Status() mcp.Status
	Reload(ctx context.Context) error
}

func (h *admin) show(w http.ResponseWriter, r *http.Request) {
	mode, err := h.store.Setting(r.Context(), "signup_mode", db.SignupOpen)
	if err != nil {
		serverError(w, r, err)
		return
	}
	prompt, err := h.store.Setting(r.Context(), db.SettingSystemPrompt, "")
	if err != nil {
		serverError(w, r, err)
		return
	}
	st, err := h.media.Settings(r.Context())
	if err != nil {
		serverError(w, r, err)
		return
	}
	rep := h.media.LastReport(r.Context())
	ms := views.MediaSettings{TTSEngine: st.TTSEngine, TTSURL: st.TTSURL, TTSModel: st.TTSModel, TTSVoice: st.TTSVoice,
		TTSKeySet: st.TTSKey != "", ImageURL: st.ImageURL, ImageModel: st.ImageModel, ImageSize: st.ImageSize,
		ImageKeySet: st.ImageKey != "", GCExpired: rep.Expired, GCRemoved: rep.Removed, GCBytes: rep.Bytes}
	if !rep.At.IsZero() {
		ms.GCAt = rep.At.Format("2006-01-02 15:04 MST")
	}
	wv, err := webSearchView(r.Context(), h.web, r.URL.Query().Has("web-saved"))
	if err != nil {
		serverError(w, r, err)
		return
	}
	parts := []templ.Component{views.AdminPage(mode, prompt, r.URL.Query().Has("saved")), views.AdminWebSearch(wv), views.AdminMedia(ms)}
	if st := h.servers(); len(st) > 0 {
		parts = append(parts, views.AdminServers(st))
	}
	if h.mcp != nil {
		parts = append(parts, views.AdminMCP(h.mcp.Status(), r.URL.Query().Has("mcp-reloaded")))
	} else {
		parts = append(parts, views.AdminMCPOff())
	}
	h.shell.page(w, r, http.StatusOK, "Administration", templ.Join(parts...))
}

func (h *admin) setSignup(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	mode := r.PostForm.Get("mode")
	if mode != db.SignupOpen && mode != db.SignupInvite && mode != db.SignupClosed {
		badRequest(w, r, "Sign-up is open, invite-only or closed.")
		return
	}
	if err := h.store.SetSetting(r.Context(), "signup_mode", mode); err != nil {
		serverError(w, r, err)
		return
	}
	redirect(w, r, "/admin?saved")
}

// setSystemPrompt stores the system prompt every request starts with.
func (h *admin) setSystemPrompt(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	prompt, ok := longText(w, r, "system_prompt", "The system prompt")
	if !ok {
		return
	}
	if err := h.store.SetSetting(r.Context(), db.SettingSystemPrompt, prompt); err != nil {
		serverError(w, r, err)
		return
	}
	redirect(w, r, "/admin?saved")
}

// reloadMCP reads WEFT_MCP_CONFIG again and reconnects every server; a
// file that does not parse leaves the servers as they were and its error
// is shown on /admin.
func (h *admin) reloadMCP(w http.ResponseWriter, r *http.Request) {
	if h.mcp == nil {
		badRequest(w, r, "No MCP servers are configured: set WEFT_MCP_CONFIG and restart Weft.")
		return
	}
	if err := h.mcp.Reload(r.Context()); err != nil {
		slog.WarnContext(r.Context(), "mcp: reload", "err", err)
		redirect(w, r, "/admin#mcp")
		return
	}
	redirect(w, r, "/admin?mcp-reloaded#mcp")
}

// maxPromptRunes caps prompts, notes and instructions.
const maxPromptRunes = 20_000

// longText reads a trimmed multi-line field of at most maxPromptRunes,
// answering the request itself when it is too long.
func longText(w http.ResponseWriter, r *http.Request, field, what string) (string, bool) {
	s := strings.TrimSpace(strings.ReplaceAll(r.PostForm.Get(field), "\r\n", "\n"))
	if utf8.RuneCountInString(s) > maxPromptRunes {
		badRequest(w, r, what+" is longer than 20,000 characters; nothing was saved.")
		return "", false
	}
	return s, true
}
