// Package views holds Weft's templ components: the page layout, the sidebar,
// the thread and its messages, the composer, and the settings screens. Views
// only render what they are given; they never query the database or decide
// authorization. Every element that tests look for carries the data-testid
// hooks of DESIGN.md §12.
package views

import (
	"fmt"
	"strconv"
	"strings"

	"weft/chat"
	"weft/db"
)

// Shell is what every signed-in page shows around its main column.
type Shell struct {
	Title      string
	User       db.User
	Workspace  db.Workspace   // the workspace the sidebar shows
	Workspaces []db.Workspace // for the switcher
	Threads    []db.ThreadSummary
	NextPage   string           // URL of the next sidebar page, empty on the last
	ActiveID   int64            // the thread being shown, if any
	Rooms      []db.RoomSummary // the rooms the user is in (issue 20)
	ActiveRoom int64            // the room being shown, if any
	Models     []string
	ModelWhere map[string]string // the servers a model is on, when there are several ("gpu1, gpu2")
	Notice     string            // a banner (for example: the model server is unreachable)
	Flash      string            // the outcome of the last action (for example a slash command)
	Search     string            // the search box's text
}

// ComposerData configures the send form.
type ComposerData struct {
	Action       string // POST target
	WorkspaceID  int64
	Models       []string
	ModelWhere   map[string]string // the servers each model is on, when there are several
	Model        string            // selected
	Append       bool              // in a thread: htmx appends the reply fragments
	ThreadID     int64             // the thread the composer writes into (0: a new one)
	Roles        []db.Role
	RoleID       *int64             // the selected role
	From         int64              // a new thread copies this thread's settings (/new)
	KBs          []db.KnowledgeBase // the workspace's knowledge bases (the kb field)
	Attached     map[int64]bool     // attached to the thread
	Content      string             // text to show again (a refused send keeps what was typed)
	Error        string             // why the last send was refused
	Agent        bool               // agent mode is on for the thread
	AgentRoot    string             // the workspace folder the agent works in
	Tools        []ToolState        // what the agent may use, and why not
	Web          bool               // "Search the web" is on for the thread
	WebOff       string             // why web search is unavailable ("": it is available)
	MaxFiles     int                // attachments per message
	MaxFileBytes int64              // per attachment
}

// ToolState is one tool's availability, as the tool settings page, the
// composer and the run trace show it (from agent.Explain).
type ToolState struct {
	Name        string
	Description string
	Class       string
	Origin      string // where the tool comes from ("" for the built-ins)
	Enabled     bool
	Mode        string // auto, ask or deny
	Rule        bool   // set by a workspace rule (not the default)
	Available   bool
	Asks        bool
	Reason      string // why it is unavailable
}

// ToolSettings is the tool settings page of a workspace.
type ToolSettings struct {
	Workspace db.Workspace
	Root      string
	Tools     []ToolState
	Saved     bool
	Error     string
	Skills    []SkillState
}

// SkillState is one skill on the tool settings page (from agent.Skill).
type SkillState struct {
	Name        string
	Description string
	Origin      string // workspace or instance
	Overrides   bool   // a workspace skill replacing an instance one
	Enabled     bool
	Problem     string // why it cannot be used ("" when valid)
}

// DebugRun is an agent run with its steps, for the debug view.
type DebugRun struct {
	Run   db.Run
	Steps []db.Step
}

// MessageView is a message with what its rendering needs to know.
type MessageView struct {
	chat.MessageItem
	Models []string // for the regenerate menu
	// Body is the answer's stored rendering (MessageBodyHTML, of this
	// RendererVersion); empty: rendered now.
	Body string
	// Commands are the slash commands typed after this message, with
	// their replies (never sent to the model).
	Commands []db.CommandEntry
	// Tree is the message's labels and the summaries of the branches
	// forking off beside it (never sent to the model).
	Tree MessageTree
}

// ThreadPage is the main column of /t/{id}.
type ThreadPage struct {
	Thread      db.Thread
	Workspaces  []db.Workspace // where the thread can be moved
	OtherBranch int64          // leaf of the branch shown when it is not the one new messages continue
	AwaitTitle  bool           // the generated title may still arrive
	Messages    []MessageView
	More        bool
	Composer    ComposerData
	Roles       []db.Role
	Usage       db.UsageTotals
	ImagesOn    bool       // image generation is configured
	Tree        ThreadTree // the thread's labels, its branch summary setting
	Share       SharePanel // the thread's share links
}

func id(n int64) string { return strconv.FormatInt(n, 10) }

func threadURL(n int64) string { return fmt.Sprintf("/t/%d", n) }

func threadTitle(t string) string {
	if t == "" {
		return "Untitled"
	}
	return t
}

// MediaSettings is the admin's view of the media settings (keys are never
// shown, only whether they are set) and the last clean-up.
type MediaSettings struct {
	TTSEngine, TTSURL, TTSModel, TTSVoice string
	TTSKeySet                             bool
	ImageURL, ImageModel, ImageSize       string
	ImageKeySet                           bool
	GCAt                                  string
	GCExpired                             int64
	GCRemoved                             int
	GCBytes                               int64
}

// serverError shortens a model server's connection error for the admin
// page (the whole text is in its title).
func serverError(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 && i+2 < len(s) {
		s = s[i+2:]
	}
	if r := []rune(s); len(r) > 80 {
		s = string(r[:80]) + "…"
	}
	return s
}

// WebSearchSettings is /admin's web search section.
type WebSearchSettings struct {
	Kind    string
	URL     string
	KeySet  bool
	Results int
	Pages   int
	Saved   bool
	Off     string // what users are told while no service is set
}
