package handlers_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"weft/internal/testenv"
)

// TestBrowserAgentAsksApprovalWritesTheFileAndListsIt is the agent's main
// flow in a browser: the agent asks before writing, the approval card
// appears live, Allow once writes the file, and the answer lists it.
func TestBrowserAgentAsksApprovalWritesTheFileAndListsIt(t *testing.T) {
	t.Parallel()
	u := newTreeUIWith(t, testenv.Options{DefaultModel: "toolie"})
	ctx := context.Background()
	owner, err := u.app.Store.UserByEmail(ctx, "tree@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := u.app.Store.DefaultWorkspace(ctx, owner.ID)
	if err != nil {
		t.Fatal(err)
	}
	root := u.app.Agent.Root(ws)
	if got := u.str(`document.querySelector('[data-testid=agent-root]')?.textContent ?? ""`); got != root {
		t.Errorf("the composer shows the workspace folder %q, want %q", got, root)
	}

	u.act("send with the agent on", chromedp.Steps(
		click(`[data-testid=composer] input[name=agent]`),
		setValue(trComposer, `Write the plan [[tool:write_file {"path":"plan.md","content":"# Plan\n1. Ship"}]]`),
		click(`[data-testid=send]`),
	), `location.pathname.startsWith("/t/") && document.querySelector('[data-testid=approval]') && `+
		// The approval step is recorded, then the run shows waiting: two events.
		`document.querySelector('[data-testid=run-status]')?.dataset.status === "waiting"`)
	if u.str(`document.querySelector('[data-testid=tool-call]')?.dataset.tool ?? ""`) != "write_file" {
		t.Errorf("no write_file card in the trace")
	}
	if _, err := os.Stat(filepath.Join(root, "plan.md")); err == nil {
		t.Fatalf("the file was written before the approval")
	}
	// The approval card is live in a second tab too.
	tab := u.newTab()
	tab.open(u.path(), `document.querySelector('[data-testid=approval] [data-decision=once]')`)

	u.do("allow once", click(`[data-testid=approval] [data-decision=once]`),
		waitFor(trLast+`?.dataset.status === "complete" && document.querySelector('[data-testid=file-change]')`))
	if got := u.str(`document.querySelector('[data-testid=file-change]').dataset.path + " " + document.querySelector('[data-testid=file-change]').dataset.op`); got != "plan.md created" {
		t.Errorf("the answer lists %q, want plan.md created", got)
	}
	b, err := os.ReadFile(filepath.Join(root, "plan.md"))
	if err != nil || !strings.Contains(string(b), "1. Ship") {
		t.Errorf("plan.md = %q (%v)", b, err)
	}
	if got := u.str(trLast + `.dataset.route`); got != "agent" {
		t.Errorf("the answer's route is %q", got)
	}
	tab.wait("the second tab shows the finished answer", trLast+`?.dataset.status === "complete" && document.querySelector('[data-testid=file-change]')`)

	// After a reload the trace is still there.
	u.open(u.path(), trLast+`?.dataset.status === "complete"`)
	if !u.yes(`document.querySelector('[data-testid=tool-call][data-tool=write_file][data-status=ok]')`) ||
		!u.yes(`document.querySelector('[data-testid=approval-decided][data-decision=once]')`) {
		t.Errorf("after a reload the trace lacks the call or the decision")
	}
}
