package handlers_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"weft/internal/testenv"
)

// TestBrowserSteerEntersTheRunningAgentAndShowsInItsTrace: /steer typed
// while the agent waits for an approval answers in the composer's notice
// area, is taken after the approved call (a Steered card after the call in
// the live trace) and stays in the thread as a command entry after a
// reload.
func TestBrowserSteerEntersTheRunningAgentAndShowsInItsTrace(t *testing.T) {
	t.Parallel()
	u := newTreeUIWith(t, testenv.Options{DefaultModel: "toolie"})
	u.act("send with the agent on", chromedp.Steps(
		click(`[data-testid=composer] input[name=agent]`),
		setValue(trComposer, `Write it [[tool:write_file {"path":"a.go","content":"x"}]]`),
		click(`[data-testid=send]`),
	), `location.pathname.startsWith("/t/") && document.querySelector('[data-testid=approval]') && `+
		`document.querySelector('[data-testid=run-status]')?.dataset.status === "waiting"`)

	u.do("steer", chromedp.Steps(
		setValue(trComposer, `/steer use tabs`),
		click(`[data-testid=send]`),
	), waitFor(`document.querySelector('[data-testid=command-result]')?.textContent.includes("Steering sent")`))

	u.do("allow once", click(`[data-testid=approval] [data-decision=once]`),
		waitFor(trLast+`?.dataset.status === "complete" && document.querySelector('[data-testid=steer][data-status=ok]')`))
	if !u.yes(`(() => { const c = document.querySelector('[data-testid=tool-call][data-tool=write_file]'), s = document.querySelector('[data-testid=steer]');
		return c && s && s.textContent.includes("use tabs") && (c.compareDocumentPosition(s) & Node.DOCUMENT_POSITION_FOLLOWING) })()`) {
		t.Errorf("the steer card is not after the approved call in the trace")
	}

	u.open(u.path(), trLast+`?.dataset.status === "complete"`)
	if !u.yes(`document.querySelector('[data-testid=steer][data-status=ok]')`) {
		t.Errorf("after a reload the trace lacks the steer")
	}
	if !u.yes(`[...document.querySelectorAll('[data-testid=command-entry]')].some(e => e.textContent.includes("/steer use tabs") && e.textContent.includes("Steering sent"))`) {
		t.Errorf("after a reload the thread lacks the /steer command entry")
	}
}
