package handlers_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// Real-browser tests of context assembly: choosing a role, slash commands
// in the composer, and the compaction marker.

const (
	cxNotice = `document.querySelector('[data-testid=composer-notice]')?.textContent ?? ""`
	cxBox    = `document.querySelector('[data-testid=composer] textarea[name=content]')`
)

// command types text into the thread's composer, sends it with Enter and
// waits for cond on the same page.
func (u *trUI) command(text, cond string) {
	u.t.Helper()
	u.do("command "+text, setValue(trComposer, text), typeInto(trComposer, "\r"), waitFor(cond))
}

// trOpenDetails opens a <details> element by clicking its summary, and
// waits until it is open.
func trOpenDetails(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		pageAct(sel+` summary`, true, `(summary) => summary.parentElement.open ? "" : (`+clickJS+`)(summary)`),
		waitFor(`document.querySelector('`+sel+`').open`),
	)
}

// saveThreadSettings opens the thread's Context panel, runs fill, saves,
// and waits for the reloaded page's flash.
func (u *trUI) saveThreadSettings(what string, fill ...chromedp.Action[chromedp.Void]) {
	u.t.Helper()
	steps := append([]chromedp.Action[chromedp.Void]{trOpenDetails(`[data-testid=thread-settings]`)}, fill...)
	steps = append(steps, click(`[data-testid=thread-settings-save]`))
	u.act(what, chromedp.Steps(steps...), `(document.querySelector('[data-testid=flash]')?.textContent ?? "").includes("Saved")`)
}

// commandReload is command for commands that load another page.
func (u *trUI) commandReload(text, cond string) {
	u.t.Helper()
	u.act("command "+text, chromedp.Steps(setValue(trComposer, text), typeInto(trComposer, "\r")), cond)
}

func TestBrowserContextChooseARoleForAThread(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	u.open("/roles", `document.querySelector('[data-testid=role-create]')`)
	form := `[data-testid=role-create] `
	u.act("refuse a bad temperature", chromedp.Steps(
		setValue(form+`input[name=name]`, "Pirate"),
		setValue(form+`textarea[name=prompt]`, "Talk like a pirate."),
		setValue(form+`input[name=temperature]`, "7"),
		click(form+`[data-testid=role-save]`),
	), `(document.querySelector('[data-testid=error]')?.textContent ?? "").includes("Temperature must be")`)
	if got := u.str(`document.querySelector('` + form + `textarea[name=prompt]').value`); got != "Talk like a pirate." {
		t.Fatalf("the refused form lost the prompt: %q", got)
	}
	u.act("create the role", chromedp.Steps(
		setValue(form+`input[name=temperature]`, "0.3"),
		click(form+`[data-testid=role-save]`),
	), `[...document.querySelectorAll('[data-testid=role]')].some(r => r.textContent.includes("Pirate"))`)

	u.open("/", `document.querySelector('[data-testid=role-select]')`)
	pirate := u.str(`[...document.querySelectorAll('[data-testid=role-select] option')].find(o => o.textContent === "Pirate").value`)
	u.act("start a thread as a pirate", chromedp.Steps(
		setValue(`[data-testid=role-select]`, pirate),
		setValue(trComposer, "Where is the treasure?"),
		click(`[data-testid=send]`),
	), `location.pathname.startsWith("/t/") && `+trLast+`?.dataset.status === "complete"`)
	req := trRequestFor(t, u.app.Fake, "Where is the treasure?")
	if req.Messages[0].Role != "system" || req.Messages[0].Content != "Talk like a pirate." || req.Options["temperature"] != 0.3 {
		t.Fatalf("the model did not get the role: %q %v", req.Messages[0].Content, req.Options)
	}
	// The thread shows its role in its settings (the thread's composer has
	// no second role picker that could undo a change made there).
	if got := u.str(`document.querySelector('[data-testid=thread-role]').value`); got != pirate {
		t.Errorf("the thread's settings show role %q, want the pirate role %s", got, pirate)
	}
	if u.yes(`document.querySelector('[data-testid=composer] [data-testid=role-select]')`) {
		t.Errorf("the thread's composer has a role picker")
	}
	// The next message keeps the role.
	u.send("And the map?")
	if req := trRequestFor(t, u.app.Fake, "And the map?"); req.Messages[0].Content != "Talk like a pirate." {
		t.Errorf("the second message lost the role: %q", req.Messages[0].Content)
	}
	// Choose no role in the thread's settings: the model gets no persona.
	u.saveThreadSettings("drop the role",
		setValue(`[data-testid=thread-role]`, ""),
		setValue(`[data-testid=thread-notes]`, "Answer in French."),
	)
	u.send("Bonjour?")
	req = trRequestFor(t, u.app.Fake, "Bonjour?")
	if req.Messages[0].Role != "system" || !strings.Contains(req.Messages[0].Content, "Answer in French.") || strings.Contains(req.Messages[0].Content, "pirate") {
		t.Errorf("after dropping the role the system message is %q", req.Messages[0].Content)
	}
}

func TestBrowserContextSlashCommandsHelpRefuseAndChangeTheThread(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	u.startThread("hello")

	// Typing "/" shows the commands; typing more narrows them.
	u.do("type a slash", typeInto(trComposer, "/co"))
	u.wait("the help shows /compact only", `!document.querySelector('[data-testid=slash-help]').hidden &&
		[...document.querySelectorAll('[data-testid=slash-help] li[data-command]')].filter(li => !li.hidden).map(li => li.dataset.command).join() === "/compact"`)

	n := u.num(trMsgs + `.length`)
	u.command("/nope", `(`+cxNotice+`).includes("Unknown command /nope")`)
	if got := u.str(cxBox + `.value.trim()`); got != "/nope" {
		t.Errorf("the refused command was cleared from the composer: %q", got)
	}
	if got := u.num(trMsgs + `.length`); got != n {
		t.Errorf("a refused command added %d messages", got-n)
	}

	u.command("/title Lisbon trip", `document.getElementById("thread-title").textContent.trim() === "Lisbon trip"`)
	u.wait("the sidebar follows", `[...document.querySelectorAll('[data-testid=thread-link]')].some(a => a.textContent.trim() === "Lisbon trip")`)
	if got := u.str(cxBox + `.value.trim()`); got != "" {
		t.Errorf("the composer kept a command that worked: %q", got)
	}

	u.command("/usage", `(`+cxNotice+`).includes("1 answers")`)

	u.commandReload("/model thinker", `(document.querySelector('[data-testid=flash]')?.textContent ?? "").includes("thinker:latest")`)
	if got := u.str(`document.querySelector('[data-testid=composer] select[name=model]').value`); got != "thinker:latest" {
		t.Errorf("the composer's model is %q after /model", got)
	}
	u.send("and now?")
	if req := trRequestFor(t, u.app.Fake, "and now?"); req.Model != "thinker:latest" {
		t.Errorf("answered by %q, want thinker:latest", req.Model)
	}

	thread := u.threadID()
	u.commandReload("/new", `location.pathname === "/" && location.search.includes("from=`+thread+`")`)
	u.act("first message of the new thread", chromedp.Steps(setValue(trComposer, "fresh start"), click(`[data-testid=send]`)),
		`location.pathname.startsWith("/t/") && location.pathname !== "/t/`+thread+`" && `+trLast+`?.dataset.status === "complete"`)
	if req := trRequestFor(t, u.app.Fake, "fresh start"); req.Model != "thinker:latest" {
		t.Errorf("/new did not keep the model: %q", req.Model)
	}
}

func TestBrowserContextCompactionShowsAMarkerThatExpandsToTheSummary(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	u.startThread("one")
	u.send("two")
	u.commandReload("/compact", `document.querySelector('[data-testid=compaction]')`)
	if got := u.str(`(document.querySelector('[data-testid=flash]')?.textContent ?? "")`); !strings.Contains(got, "Summarized 2 earlier messages") {
		t.Errorf("flash = %q", got)
	}
	// The marker stands after the last summarized message (the first
	// answer) and expands to the summary; the originals stay visible.
	firstAnswer := u.str(trAnswers + `[0].dataset.messageId`)
	if got := u.str(`document.querySelector('[data-testid=compaction]').previousElementSibling.dataset.messageId`); got != firstAnswer {
		t.Errorf("the marker follows message %s, want the first answer %s", got, firstAnswer)
	}
	if u.yes(`document.querySelector('[data-testid=compaction-summary]').checkVisibility()`) {
		t.Errorf("the summary is shown before the marker is opened")
	}
	u.do("open the marker", click(`[data-testid=compaction] summary`))
	u.wait("the summary shows", `document.querySelector('[data-testid=compaction-summary]').checkVisibility() &&
		document.querySelector('[data-testid=compaction-summary]').textContent.startsWith("Summary: ")`)
	if got := u.num(trMsgs + `.length`); got != 4 {
		t.Errorf("%d messages visible after compaction, want all 4", got)
	}
	u.send("three")
	if req := trRequestFor(t, u.app.Fake, "three"); !strings.Contains(req.Messages[0].Content, "Summary: ") || len(req.Messages) != 4 {
		t.Errorf("after /compact the model got %d messages starting %q", len(req.Messages), req.Messages[0].Content)
	}

	// Automatic: with a small context window the third long question does
	// not fit; the summary is written first and its marker appears without
	// a reload.
	u.saveThreadSettings("a small context window", setValue(`[data-testid=thread-num-ctx]`, "1024"))
	markers := u.num(`document.querySelectorAll('[data-testid=compaction]').length`)
	u.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__cxSame = true`))
	for i := range 3 {
		u.send(fmt.Sprintf("question %d %s", i, strings.Repeat("words and more words ", 40)))
		if u.num(`document.querySelectorAll('[data-testid=compaction]').length`) > markers {
			break
		}
	}
	u.wait("a new marker", fmt.Sprintf(`document.querySelectorAll('[data-testid=compaction]').length > %d`, markers))
	if !u.yes(`window.__cxSame`) {
		t.Errorf("the page was reloaded to show the marker")
	}
	u.wait("the gauge", `document.querySelector('[data-testid=context-gauge]')?.dataset.numCtx === "1024"`)

	// Compaction off: the marker says its summary is not used.
	u.saveThreadSettings("switch compaction off",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid=thread-compaction]').checked = false`))
	if !u.yes(`[...document.querySelectorAll('[data-testid=compaction]')].every(m => m.textContent.includes("not used"))`) {
		t.Errorf("with compaction off the markers do not say their summary is unused")
	}
}
