package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"weft/agent"
	"weft/db"
	"weft/internal/mcptest"
	"weft/internal/testenv"
	"weft/mcp"
)

// An approval may wait while the MCP servers change: once allowed, the call
// goes to the tool as it is then — the server of the reload, not the one
// the run looked up before it asked — and a tool the server stopped
// offering meanwhile is refused with its reason, never sent.
func TestAnMCPCallApprovedAfterItsServerChangedUsesTheToolOfNow(t *testing.T) {
	t.Parallel()
	srv := mcptest.StartHTTP(t)
	e := newAgentEnv(t, testenv.Options{MCP: mcpConfig(map[string]mcp.ServerConfig{"srv": srv.Config()})})
	waitMCPTool(t, e.app.Agent, "srv__note", "is available", mcpReady)
	decide := func(thread int64) {
		t.Helper()
		ap := e.pending(thread, db.StepApproval)
		if r := e.c.Post(fmt.Sprintf("/steps/%d/decide", ap.ID), url.Values{"decision": {"once"}}); r.StatusCode != http.StatusSeeOther {
			t.Fatalf("decide: %d %s", r.StatusCode, r.Body)
		}
	}

	thread := e.start(`Remember [[tool:srv__note {"text":"after the reload"}]]`)
	e.pending(thread, db.StepApproval)
	if err := e.app.MCP.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitMCPTool(t, e.app.Agent, "srv__note", "is available again", mcpReady)
	decide(thread)
	run, _ := e.finished(thread)
	if got := strings.Join(e.calls(run.ID), " "); got != "srv__note:ok" {
		t.Errorf("a call approved after a reload: %s: %s", got, e.describe(run.ID))
	}
	if got := strings.Join(toolResults(e), "|"); got != "srv__note=noted: after the reload" {
		t.Errorf("the model read %q", got)
	}

	thread = e.start(`Remember [[tool:srv__note {"text":"gone"}]]`)
	e.pending(thread, db.StepApproval)
	srv.Remove("note")
	const gone = "The MCP server srv no longer offers this tool."
	waitMCPTool(t, e.app.Agent, "srv__note", "is no longer offered", func(t agent.Tool) bool { return t.Unavailable == gone })
	decide(thread)
	run, _ = e.finished(thread)
	if got := strings.Join(e.calls(run.ID), " "); got != "srv__note:refused" {
		t.Errorf("a call approved after its tool was removed: %s: %s", got, e.describe(run.ID))
	}
	if got := strings.Join(toolResults(e), "|"); got != "srv__note=Refused: "+gone {
		t.Errorf("the model read %q", got)
	}
}
