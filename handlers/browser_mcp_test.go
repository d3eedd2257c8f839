package handlers_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"weft/internal/mcptest"
	"weft/internal/testenv"
	"weft/mcp"
)

// TestBrowserAnMCPToolAsksForApprovalAndRunsWhenAllowed is an MCP tool in
// the browser: its card in the trace, its approval live, and once allowed
// the server's result in the card and the finished answer.
func TestBrowserAnMCPToolAsksForApprovalAndRunsWhenAllowed(t *testing.T) {
	t.Parallel()
	srv := mcptest.StartHTTP(t)
	u := newTreeUIWith(t, testenv.Options{DefaultModel: "toolie", MCP: mcpConfig(map[string]mcp.ServerConfig{"srv": srv.Config()})})
	waitMCPTool(t, u.app.Agent, "srv__note", "is available", mcpReady)

	const card = `document.querySelector('[data-testid=tool-call][data-tool="srv__note"]')`
	u.act("send with the agent on", chromedp.Steps(
		click(`[data-testid=composer] input[name=agent]`),
		setValue(trComposer, `Remember [[tool:srv__note {"text":"<i>milk</i>"}]]`),
		click(`[data-testid=send]`),
	), `location.pathname.startsWith("/t/") && `+card+` && document.querySelector('[data-testid=approval] [data-decision=once]')`)
	if got := u.str(`document.querySelector('[data-testid=run-status]')?.dataset.status ?? ""`); got != "waiting" {
		t.Errorf("while the approval waits the run shows %q, want waiting", got)
	}
	select {
	case name := <-srv.Calls:
		t.Fatalf("the server was called (%s) before the approval", name)
	default:
	}

	u.do("allow once", click(`[data-testid=approval] [data-decision=once]`),
		waitFor(trLast+`?.dataset.status === "complete" && `+card+`?.dataset.status === "ok"`))
	if got := u.str(card + `.textContent`); !strings.Contains(got, "noted: <i>milk</i>") {
		t.Errorf("the card shows %q, want the server's result as text", got)
	}
	if u.yes(card + `.querySelector('i')`) {
		t.Errorf("the server's result was rendered as markup")
	}
	if !u.yes(`document.querySelector('[data-testid=approval-decided][data-decision=once]')`) {
		t.Errorf("the trace lacks the decision")
	}
}
