package handlers_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"weft/internal/fakeollama"
	"weft/internal/testenv"
)

// TestBrowserGoalContinuesOnItsOwnAndStopsAtItsBudget: /goal typed into
// an agent thread shows the goal panel; after the next answer the page
// follows the goal on its own — the continuation appears and streams
// without a click — and the panel ends stopped at its budget, with the
// checks shown as notes in the thread.
func TestBrowserGoalContinuesOnItsOwnAndStopsAtItsBudget(t *testing.T) {
	t.Parallel()
	judge := &goalEnv{verdicts: []string{notMet}}
	u := newTreeUIWith(t, testenv.Options{DefaultModel: "toolie", Fake: fakeollama.New(t, fakeollama.WithScript(judge.reply))})
	u.act("send with the agent on", chromedp.Steps(
		click(`[data-testid=composer] input[name=agent]`),
		setValue(trComposer, "hello"),
		click(`[data-testid=send]`),
	), `location.pathname.startsWith("/t/") && `+trLast+`?.dataset.status === "complete"`)

	u.do("set a goal", chromedp.Steps(
		setValue(trComposer, "/goal write the report"),
		click(`[data-testid=send]`),
	), waitFor(`document.querySelector('[data-testid=command-result]')?.textContent.includes("Goal set") && `+
		`document.querySelector('[data-testid=goal]')?.dataset.status === "active"`))
	u.do("give it one continuation", chromedp.Steps(
		setValue(trComposer, "/goal budget runs=1"),
		click(`[data-testid=send]`),
	), waitFor(`document.querySelector('[data-testid=command-result]')?.textContent.includes("Budget set") && `+
		`document.querySelector('[data-testid=goal-budget]')?.textContent.includes("of 1")`))

	u.do("send a message", chromedp.Steps(
		setValue(trComposer, "start on the report"),
		click(`[data-testid=send]`),
	), waitForWithin(trUsers+`.some(m => `+trText("m")+`.startsWith("Continue toward the goal: write the report")) && `+
		trLast+`?.dataset.status === "complete" && document.querySelector('[data-testid=goal]')?.dataset.status === "stopped"`, 45*time.Second))
	if !u.yes(`document.querySelector('[data-testid=goal-note]')?.textContent.includes("all 1 continuation runs of the budget are used")`) {
		t.Errorf("the panel does not say the budget stopped the goal")
	}
	if n := u.num(`[...document.querySelectorAll('[data-testid=command-entry]')].filter(e => e.textContent.includes("goal check")).length`); n != 2 {
		t.Errorf("%d goal check notes in the thread, want 2", n)
	}
	if n := u.num(trUsers + `.filter(m => ` + trText("m") + `.startsWith("Continue toward the goal")).length`); n != 1 {
		t.Errorf("%d continuations on the page, want 1", n)
	}
}
