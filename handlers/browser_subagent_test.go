package handlers_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"weft/agent"
	"weft/internal/testenv"
)

// TestBrowserSubAgentCardsStreamLiveAndReplayAfterAReload: a parallel
// delegation shows a card per child in the live trace; the child that
// writes asks for approval on its own card, which names it; a reload in the
// middle shows the same cards and approval; allowing it completes both
// children and the answer, whose folded trace keeps the cards.
func TestBrowserSubAgentCardsStreamLiveAndReplayAfterAReload(t *testing.T) {
	t.Parallel()
	u := newTreeUIWith(t, testenv.Options{DefaultModel: "toolie"})
	msg := delegation(agent.ToolDelegateParallel,
		map[string]any{"task": `Look around. [[tool:list_files {"path":"."}]]`},
		map[string]any{"task": `Write the plan. [[tool:write_file {"path":"plan.md","content":"# Plan"}]]`, "tools": []string{"write_file"}},
	)
	const waiting = `document.querySelectorAll('[data-testid=subagent]').length === 2 && ` +
		`document.querySelector('[data-testid=subagent][data-status=completed]') && ` +
		`[...document.querySelectorAll('[data-testid=subagent]')].some(c => c.querySelector('[data-testid=approval]') && ` +
		`c.querySelector('[data-testid=subagent-asks]')?.textContent.includes("Sub-agent 2 of 2"))`
	u.act("send the delegation", chromedp.Steps(
		click(`[data-testid=composer] input[name=agent]`),
		setValue(trComposer, msg),
		click(`[data-testid=send]`),
	), `location.pathname.startsWith("/t/") && `+waiting+` && `+
		`document.querySelector('[data-testid=run-status]')?.dataset.status === "waiting"`)

	// A reload in the middle replays the cards and the named approval.
	u.open(u.path(), waiting)

	u.do("allow the child's write", click(`[data-testid=subagent] [data-testid=approval] [data-decision=once]`),
		waitFor(trLast+`?.dataset.status === "complete" && document.querySelectorAll('[data-testid=subagent][data-status=completed]').length === 2`))
	if !u.yes(`document.querySelector('[data-testid=subagent-change][data-path="plan.md"]') && ` +
		`document.querySelector('[data-testid=file-change][data-path="plan.md"]')`) {
		t.Errorf("the child's change is not on its card and in the answer's evidence")
	}
	u.open(u.path(), trLast+`?.dataset.status === "complete"`)
	if !u.yes(`document.querySelectorAll('[data-testid=subagent][data-status=completed]').length === 2 && ` +
		`document.querySelectorAll('[data-testid=subagent-answer]').length === 2`) {
		t.Errorf("after a reload the answer's trace lacks the completed sub-agent cards")
	}
}
