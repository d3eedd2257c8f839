// Package agent is the tool-using route: the built-in tools (workspace
// files confined to the workspace root, knowledge-base search through rag,
// ask-the-user, web fetch), their governance per workspace, the tool loop
// over Ollama's native tool calling, approvals, questions, checkpoints and
// the evidence an answer ends with. It stores everything through db and
// reaches knowledge bases only through rag; it never renders HTML or reads
// HTTP requests.
package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/ollama/ollama/api"

	"weft/db"
)

// Class is what a tool can do, which decides its default policy.
type Class string

// Classes of tools.
const (
	ClassRead    Class = "read"    // reads the workspace or knowledge bases: auto by default
	ClassWrite   Class = "write"   // changes the workspace: ask by default
	ClassNetwork Class = "network" // reaches the internet: disabled by default
	ClassAsk     Class = "ask"     // asks the user: auto, it is itself a question
	// ClassExec runs programs or calls other servers whose effects Weft
	// cannot see in advance (run_command, MCP tools not marked read-only):
	// ask by default, and, like a write, never made again by a resumed run
	// that finds it started.
	ClassExec Class = "exec"
)

// Effects reports whether a call of the class may change something, so
// that a run resumed after a crash must not make it again.
func (c Class) Effects() bool { return c == ClassWrite || c == ClassExec || c == ClassDelegate }

// Param is one argument of a tool.
type Param struct {
	Name        string
	Type        string // "string", "integer", "boolean", "array", "object"
	Description string
	Required    bool
	Enum        []string
	Items       any // the JSON schema of array items, when Type is "array"
}

// Tool is one tool: a built-in, or one a Provider offers (an MCP server's,
// the sandboxed shell, skills).
type Tool struct {
	Name        string
	Description string
	Class       Class
	Params      []Param
	// Schema, when set, is the arguments' JSON schema as given whole (an
	// MCP server's input schema); Params is then unused.
	Schema *api.ToolFunctionParameters
	// Origin says where a tool comes from, shown beside it ("" for the
	// built-ins, "MCP server docs" for a server's tools).
	Origin string
	// Unavailable says why the tool cannot run now, whatever the
	// workspace's rules ("The MCP server docs is not reachable: …", "The
	// sandbox cannot be set up on this server: …"); "" when it can. Every
	// page and the run trace show it as the tool's reason.
	Unavailable string
	// Run executes the tool. An error the model should see and correct
	// (bad arguments, a missing file, a path outside the workspace) is a
	// *ToolError; any other error is reported to the model as a failed
	// tool too, with a generic text.
	Run func(ctx context.Context, env *Env, args Args) (Result, error)
}

// Result is what a tool call produced.
type Result struct {
	// Output is the text the model gets back (already capped by the tool).
	Output string
	// Changes lists the workspace files the call created, modified or
	// deleted (empty for read-only tools and for failures).
	Changes []Change
	// Sources lists what the call read that an answer may cite.
	Sources []Source
}

// Change is one file changed by a successful tool call.
type Change = db.FileChange

// Change operations.
const (
	OpCreated  = "created"
	OpModified = "modified"
	OpDeleted  = "deleted"
)

// Source is something the agent read: a workspace file ("file"), a
// knowledge-base chunk ("kb") or a web page ("web").
type Source = db.StepSource

// ToolError is a failure the model is told about in plain words so that it
// can correct its call; it is never an internal error text.
type ToolError struct{ Msg string }

func (e *ToolError) Error() string { return e.Msg }

// Errorf returns a *ToolError.
func Errorf(format string, a ...any) error { return &ToolError{Msg: fmt.Sprintf(format, a...)} }

// Env is what a tool call may use: the workspace it is confined to and the
// acting user's access.
type Env struct {
	// Root is the absolute path of the workspace folder (it exists).
	Root string
	User int64
	// Thread is the thread the run answers in.
	Thread int64
	// SearchKB searches the thread's knowledge bases with the user's own
	// authorization (nil: no knowledge base attached).
	SearchKB func(ctx context.Context, query string, topK int) ([]KBHit, error)
	// Fetch fetches a web page (nil: web fetch is not configured).
	Fetch func(ctx context.Context, url string) (FetchResult, error)
	// Workspace and Run identify the call's workspace and run.
	Workspace int64
	Run       int64
	// Narrow is a room agent's tool policy (tool name or skill:NAME →
	// auto, ask or deny), which narrows the workspace's rules (nil in a
	// thread; agent/room.go).
	Narrow map[string]string
	// run is the run making the call (delegation starts its children).
	run *run
	// Progress, when set, reports a long call's progress (a command's
	// output so far, an MCP server's progress notification); it never
	// blocks for long. Tools may call it from any goroutine.
	Progress func(text string)
}

// KBHit is one knowledge-base search result.
type KBHit struct {
	DocumentID int64
	ChunkID    int64
	Document   string
	Headings   []string
	Page       int
	Text       string
	Score      float64
}

// FetchResult is a fetched web page as text.
type FetchResult struct {
	URL         string // the final URL after redirects
	ContentType string
	Text        string // the page as text, capped
	Truncated   bool
}

// Args are the arguments of a tool call.
type Args map[string]any

// String returns a string argument; a required one that is missing or not a
// string is a *ToolError.
func (a Args) String(name string, required bool) (string, error) {
	v, ok := a[name]
	if !ok || v == nil {
		if required {
			return "", Errorf("missing argument %q", name)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", Errorf("argument %q must be a string", name)
	}
	return s, nil
}

// Int returns an integer argument (def when absent).
func (a Args) Int(name string, def int) (int, error) {
	v, ok := a[name]
	if !ok || v == nil {
		return def, nil
	}
	switch n := v.(type) {
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1<<31 {
			return 0, Errorf("argument %q must be a whole number", name)
		}
		return int(n), nil
	case int:
		return n, nil
	case int64:
		return int(n), nil
	case string:
		var i int
		if _, err := fmt.Sscanf(strings.TrimSpace(n), "%d", &i); err == nil {
			return i, nil
		}
	}
	return 0, Errorf("argument %q must be a whole number", name)
}

// Bool returns a boolean argument (def when absent).
func (a Args) Bool(name string, def bool) (bool, error) {
	v, ok := a[name]
	if !ok || v == nil {
		return def, nil
	}
	switch b := v.(type) {
	case bool:
		return b, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(b)) {
		case "true", "yes", "1":
			return true, nil
		case "false", "no", "0":
			return false, nil
		}
	}
	return false, Errorf("argument %q must be true or false", name)
}

// ErrUnknownTool is returned for a call of a tool that does not exist.
var ErrUnknownTool = errors.New("unknown tool")

// apiTool is the tool's declaration for the model.
func (t Tool) apiTool() api.Tool {
	if t.Schema != nil {
		params := *t.Schema
		if params.Type == "" {
			params.Type = "object"
		}
		if params.Properties == nil {
			params.Properties = api.NewToolPropertiesMap()
		}
		return api.Tool{Type: "function", Function: api.ToolFunction{Name: t.Name, Description: t.Description, Parameters: params}}
	}
	props := api.NewToolPropertiesMap()
	var required []string
	for _, p := range t.Params {
		tp := api.ToolProperty{Type: api.PropertyType{p.Type}, Description: p.Description, Items: p.Items}
		for _, e := range p.Enum {
			tp.Enum = append(tp.Enum, e)
		}
		props.Set(p.Name, tp)
		if p.Required {
			required = append(required, p.Name)
		}
	}
	return api.Tool{Type: "function", Function: api.ToolFunction{
		Name:        t.Name,
		Description: t.Description,
		Parameters:  api.ToolFunctionParameters{Type: "object", Required: required, Properties: props},
	}}
}
