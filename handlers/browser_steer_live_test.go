package handlers_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"weft/internal/testenv"
)

// TestBrowserASteerShowsAsPendingInEveryTabUntilTaken: /steer typed in one
// tab while the agent waits for an approval shows at once, in that tab and
// in a second tab on the same thread, as a pending card ("waiting for the
// next round"); once the approved call ran it is a Steered card in both.
func TestBrowserASteerShowsAsPendingInEveryTabUntilTaken(t *testing.T) {
	t.Parallel()
	u := newTreeUIWith(t, testenv.Options{DefaultModel: "toolie"})
	waiting := `document.querySelector('[data-testid=approval]') && document.querySelector('[data-testid=run-status]')?.dataset.status === "waiting"`
	u.act("send with the agent on", chromedp.Steps(
		click(`[data-testid=composer] input[name=agent]`),
		setValue(trComposer, `Write it [[tool:write_file {"path":"a.go","content":"x"}]]`),
		click(`[data-testid=send]`),
	), `location.pathname.startsWith("/t/") && `+waiting)
	other := u.newTab()
	other.open(u.path(), waiting)

	u.do("steer", chromedp.Steps(
		setValue(trComposer, `/steer use tabs`),
		click(`[data-testid=send]`),
	), waitFor(`document.querySelector('[data-testid=command-result]')?.textContent.includes("Steering sent")`))
	pending := `document.querySelector('[data-testid=steer][data-status=pending]')?.textContent.includes("waiting for the next round")`
	u.wait("the pending card in the steering tab", pending)
	other.wait("the pending card in the other tab", pending)

	u.do("allow once", click(`[data-testid=approval] [data-decision=once]`),
		waitFor(trLast+`?.dataset.status === "complete" && document.querySelector('[data-testid=steer][data-status=ok]')`))
	other.wait("the steered card in the other tab", trLast+`?.dataset.status === "complete" && document.querySelector('[data-testid=steer][data-status=ok]')?.textContent.includes("use tabs")`)
}
