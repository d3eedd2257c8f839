package handlers_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
)

// A person uploads ChatGPT's conversations.json on /import, watches the
// import's page until its report lists what was imported and what was
// skipped, and opens an imported thread: the visible branch is ChatGPT's
// current one, with the edited question and the regenerated answer each
// showing 2/2.
func TestBrowserImportOfAChatGPTExportShowsItsReportAndOpensTheThreads(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	data := fixture(t, "chatgpt_conversations.json")

	u.open("/import", `document.querySelector('[data-testid=import-form]')`)
	u.do("choose conversations.json", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const dt = new DataTransfer();
		dt.items.add(new File([%s], "conversations.json", {type: "application/json"}));
		document.querySelector('[data-testid=import-form] input[name=file]').files = dt.files;
	})()`, strconv.Quote(string(data)))))
	u.act("import", click(`[data-testid=import-form] button[type=submit]`),
		`location.pathname.startsWith("/imports/") && document.querySelector('[data-testid=import-progress]')`)
	// The progress part reloads itself until the job has ended.
	u.wait("the report", `document.querySelector('[data-testid=import-progress][data-status=done] [data-testid=import-report]')`)
	items := `[...document.querySelectorAll('[data-testid=import-item]')]`
	if got := trEval[[]string](u, items+`.map(li => li.dataset.status + ": " + li.firstElementChild.textContent.trim())`); !slices.Equal(got, []string{
		"skipped: New chat", "imported: Steeping tea ☕ お茶", "imported: Primes in Python", "imported: Заметки — short",
	}) {
		t.Errorf("the report lists %q", got)
	}
	if got := u.str(`document.querySelector('[data-testid=import-item][data-status=skipped] [data-testid=import-note]').textContent`); got != "it has no messages with text" {
		t.Errorf("the skipped conversation's reason: %q", got)
	}

	u.act("open the tea thread", click(`[data-testid=import-thread]`), `location.pathname.startsWith("/t/") && `+trLast)
	want := []string{
		"user: How long should I steep sencha at 70 °C?",
		"assistant: Steep sencha for 60–90 seconds; a second infusion needs less.",
		"user: [image not imported] Which tea is this?",
		"assistant: That looks like gyokuro 🍵.",
	}
	if got := u.convo(); !slices.Equal(got, want) {
		t.Errorf("the imported thread shows %q, want %q", got, want)
	}
	if got := u.positions(); !slices.Equal(got, []string{"2/2", "2/2", "", ""}) {
		t.Errorf("branch positions %q", got)
	}
	thread := u.threadID()
	if !u.yes(`document.querySelector('#thread-link-` + thread + `')`) {
		t.Error("the imported thread is not in the sidebar")
	}
	// The other version of the question is a click away.
	u.act("previous version", click(`[data-testid=message][data-role=user] [data-testid=branch-prev]`),
		trUsers+`[0] && `+trText(trUsers+`[0]`)+` === "How long should I steep green tea?"`)
	if got := u.positions(); !slices.Equal(got, []string{"1/2", ""}) {
		t.Errorf("after going back, positions %q", got)
	}
}
