package handlers_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"weft/agent"
	"weft/internal/testenv"
)

// TestBrowserAgentCheckpointCardShowsLiveAndAfterAReload: a run whose
// rounds outgrow the window shows its checkpoint in the trace as it is
// written, with the rounds it covers and the summary to unfold; after Stop
// and a reload the card is still there.
func TestBrowserAgentCheckpointCardShowsLiveAndAfterAReload(t *testing.T) {
	t.Parallel()
	fake := smallToolie(t)
	u := newTreeUIWith(t, testenv.Options{DefaultModel: "toolie", Fake: fake})
	ctx := context.Background()
	owner, err := u.app.Store.UserByEmail(ctx, "tree@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := u.app.Store.DefaultWorkspace(ctx, owner.ID)
	if err != nil {
		t.Fatal(err)
	}
	e := &agentEnv{t: t, app: u.app, user: owner, ws: ws, root: u.app.Agent.Root(ws)}
	e.allow("write_file", agent.ModeAuto)
	e.writeDocs(compactRounds)
	// The request after the first checkpoint is held open: the run is
	// still running while the card shows.
	var hang atomic.Bool
	hang.Store(true)
	fake.SetScript(roundsScript(e.root, &hang))

	const card = `document.querySelector('[data-testid=agent-checkpoint][data-status=ok]')`
	u.act("send with the agent on", chromedp.Steps(
		click(`[data-testid=composer] input[name=agent]`),
		setValue(trComposer, "Write every step file and read its document."),
		click(`[data-testid=send]`),
	), `location.pathname.startsWith("/t/") && `+card+` && document.querySelector('[data-testid=stop]')`)
	if got := u.str(card + `.dataset.covers`); got != "2" {
		t.Errorf("the live card covers %q rounds, want 2", got)
	}
	if got := u.str(card + `.querySelector('summary').textContent`); !strings.Contains(got, "rounds 1–2 summarized") {
		t.Errorf("the card's heading is %q", got)
	}
	if u.yes(card + `.open`) {
		t.Errorf("the summary is unfolded before it is asked for")
	}
	u.do("unfold the summary", click(`[data-testid=agent-checkpoint] summary`),
		waitFor(`document.querySelector('[data-testid=checkpoint-summary]')?.checkVisibility()`))
	if got := u.str(`document.querySelector('[data-testid=checkpoint-summary]').textContent`); !strings.HasPrefix(got, "Summary: ") {
		t.Errorf("the unfolded summary is %q", got)
	}

	u.do("stop", click(`[data-testid=stop]`), waitFor(trLast+`?.dataset.status === "cancelled"`))
	hang.Store(false)
	u.open(u.path(), trLast+`?.dataset.status === "cancelled" && `+card)
	if got := u.str(card + `.dataset.covers`); got != "2" {
		t.Errorf("after a reload the card covers %q rounds, want 2", got)
	}
	if !u.yes(card + `.textContent.includes("step1.txt")`) {
		t.Errorf("after a reload the card does not list the files changed up to it")
	}
}
