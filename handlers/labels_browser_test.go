package handlers_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// trLabels are the names of the labels shown on a message element.
func trLabels(el string) string {
	return `[...((` + el + `)?.querySelectorAll('[data-testid=label] > summary') ?? [])].map(s => s.textContent.trim())`
}

// label gives a message a label through its Label control.
func (u *trUI) label(id, name string) {
	u.t.Helper()
	sel := "#m" + id
	u.do("open the label control of message "+id,
		click(sel+` [data-testid=label-add]`),
		waitFor(trByID(id)+`.querySelector('[data-testid=label-form]').checkVisibility()`),
	)
	u.act("label message "+id+" "+name,
		chromedp.Steps(
			setValue(sel+` [data-testid=label-form] input[name=name]`, name),
			click(sel+` [data-testid=label-save]`),
		),
		trLabels(trByID(id))+`.includes(`+strconv.Quote(name)+`)`)
}

// A label on a message of one branch is listed on the thread; after
// switching to another branch, the list jumps back to the labelled
// message (switching branch) and shows it with its label.
func TestBrowserLabelsListJumpsToALabelledMessageOnAnotherBranch(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	u.startThread("one")
	u.send("two")
	u2 := u.userID("two")
	a2 := u.answerAfter(u2)
	u.label(a2, "first try")
	if got := u.str(`document.querySelector('[data-testid=label-list] [data-testid=label-entry]')?.textContent.replace(/\s+/g, " ").trim() ?? ""`); got == "" {
		t.Fatal("the thread's list of labels does not list the new label")
	}

	// Another branch: the labelled answer is no longer shown.
	u.edit(u2, "two edited")
	if u.yes(trByID(a2)) {
		t.Fatalf("the labelled answer is still shown on the other branch: %q", u.convo())
	}
	if got := u.positions(); !slices.Equal(got, []string{"", "", "2/2", ""}) {
		t.Fatalf("branch positions on the edited branch = %q", got)
	}

	// The list jumps back.
	u.do("open the list of labels",
		click(`[data-testid=label-list] > summary`),
		waitFor(`document.querySelector('[data-testid=label-list] [data-testid=label-jump]').checkVisibility()`),
	)
	entry := `[data-testid=label-list] [data-testid=label-entry][data-message-id="` + a2 + `"] [data-testid=label-jump]`
	u.act("jump to the label", click(entry), trByID(a2))
	if got, want := u.convo(), []string{"user: one", "assistant: You said: one", "user: two", "assistant: You said: two"}; !slices.Equal(got, want) {
		t.Fatalf("after the jump the conversation = %q, want %q", got, want)
	}
	if got := u.positions(); !slices.Equal(got, []string{"", "", "1/2", ""}) {
		t.Errorf("after the jump branch positions = %q, want the first version shown", got)
	}
	if got := trEval[[]string](u, trLabels(trByID(a2))); !slices.Equal(got, []string{"first try"}) {
		t.Errorf("the labelled answer shows labels %q", got)
	}
	if got := u.str(`location.hash`); got != "#m"+a2 {
		t.Errorf("the page is at %q, want the labelled message", got)
	}
	// The choice is saved: a reload shows the same branch.
	u.act("reload", chromedp.Reload(), trLast)
	if !u.yes(trByID(a2)) {
		t.Errorf("after a reload the labelled answer is gone: %q", u.convo())
	}
}

// With branch summaries on, switching away from a branch shows, where it
// forks, a summary that arrives without a reload.
func TestBrowserLeavingABranchShowsItsSummaryWhereItForks(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	u.startThread("one")
	u.send("two")
	u2 := u.userID("two")
	u.edit(u2, "two edited")
	edited := u.userID("two edited")
	u.do("open the labels panel",
		click(`[data-testid=label-list] > summary`),
		waitFor(`document.querySelector('[data-testid=summarize-branches]').checkVisibility()`),
	)
	u.act("switch branch summaries on", click(`[data-testid=summarize-branches]`),
		`document.querySelector('[data-testid=summarize-branches]')?.getAttribute("aria-pressed") === "true"`)
	u.act("previous version", click(`#m`+edited+` [data-testid=branch-prev]`), trPos(trUsers+`[1]`)+` === "1/2"`)
	node := `document.querySelector('[data-testid=branch-summary][data-message-id="` + edited + `"]')`
	u.wait("the summary of the branch left is written and shown", node+`?.dataset.status === "complete"`)
	if got := u.str(node + `.querySelector('[data-testid=branch-summary-text]').textContent`); !strings.Contains(got, "two edited") {
		t.Errorf("the summary reads %q, want it about the branch left", got)
	}
	if !u.yes(node + `.closest('li').nextElementSibling?.id === "m` + u2 + `"`) {
		t.Error("the summary is not shown at the fork, just before the version now shown")
	}
}
