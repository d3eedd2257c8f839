package handlers_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"weft/db"
)

const cxClear = `document.querySelector('[data-testid=context-clear]')`

// /clear typed into the composer shows a marker after the last answer; the
// next message is sent without the turns above it, which stay on the page;
// Undo on the marker removes it and the next message carries them again.
func TestBrowserClearStartsANewContextAndUndoBringsTheTurnsBack(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	u.startThread("one")
	u.send("two")
	u.commandReload("/clear", cxClear)
	if !u.yes(`(` + trLast + `.compareDocumentPosition(` + cxClear + `) & Node.DOCUMENT_POSITION_FOLLOWING)`) {
		t.Errorf("the clear marker is not after the last answer")
	}
	if !u.yes(`[...document.querySelectorAll('[data-testid=command-entry]')].some(e => e.textContent.includes("/clear") && e.textContent.includes("Context cleared."))`) {
		t.Errorf("the thread lacks the /clear command entry")
	}

	u.send("three")
	if got, want := trRoles(trRequestFor(t, u.app.Fake, "three")), []string{"user: three"}; !slices.Equal(got, want) {
		t.Errorf("after /clear the model got %q, want %q", got, want)
	}
	if got := u.convo(); len(got) != 6 || got[0] != "user: one" {
		t.Errorf("the earlier turns left the page: %q", got)
	}

	u.do("undo the clear", click(`[data-testid=context-clear-undo]`), waitFor(`!`+cxClear))
	u.send("four")
	want := []string{"user: one", "assistant: You said: one", "user: two", "assistant: You said: two",
		"user: three", "assistant: You said: three", "user: four"}
	if got := trRoles(trRequestFor(t, u.app.Fake, "four")); !slices.Equal(got, want) {
		t.Errorf("after Undo the model got %q, want %q", got, want)
	}
	u.act("reload", chromedp.Reload(), trLast+`?.dataset.status === "complete"`)
	if u.yes(cxClear) {
		t.Errorf("the marker is back after a reload")
	}
}

// /memory lists the user's memories, saves an edited one and deletes one
// after confirming.
func TestBrowserMemoryPageListsEditsAndDeletesMemories(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	ctx := context.Background()
	user, err := u.app.Store.UserByEmail(ctx, "tree@example.com")
	if err != nil {
		t.Fatal(err)
	}
	kept, err := u.app.Store.AddMemory(ctx, user.ID, db.MemoryInput{Fact: "Lives in Porto", Source: db.MemoryAgent})
	if err != nil {
		t.Fatal(err)
	}
	items := `[...document.querySelectorAll('[data-testid=memory-item]')]`
	u.open("/memory", `document.querySelector('[data-testid=memory-add]')`)
	u.act("add a memory", chromedp.Steps(
		setValue(`[data-testid=memory-add] input[name=fact]`, "Prefers tea"),
		click(`[data-testid=memory-add] button[type=submit]`),
	), items+`.length === 2`)
	tea := u.str(items + `.find(li => li.querySelector('input[name=fact]').value === "Prefers tea")?.dataset.memoryId ?? ""`)
	if tea == "" {
		t.Fatalf("the added memory is not listed")
	}
	porto := `[data-testid=memory-item][data-memory-id="` + strconv.FormatInt(kept.ID, 10) + `"]`
	if !u.yes(`document.querySelector('` + porto + `')?.textContent.includes("Remembered by the agent")`) {
		t.Errorf("the agent's memory does not say where it came from")
	}

	u.act("edit it", chromedp.Steps(
		setValue(porto+` input[name=fact]`, "Lives in Lisbon"),
		click(porto+` [data-testid=memory-save]`),
	), `document.querySelector('`+porto+` input[name=fact]')?.value === "Lives in Lisbon"`)

	u.do("accept the confirmation", chromedp.Evaluate[chromedp.Void](`window.confirm = (m) => { sessionStorage.setItem("cxConfirm", m); return true; }`))
	tsel := `[data-testid=memory-item][data-memory-id="` + tea + `"]`
	u.act("delete the other", click(tsel+` [data-testid=memory-delete]`), `!document.querySelector('`+tsel+`') && `+items+`.length === 1`)
	if got := u.str(`sessionStorage.getItem("cxConfirm") ?? ""`); !strings.Contains(got, "Delete this memory") {
		t.Errorf("the confirmation asked %q", got)
	}

	mems, err := u.app.Store.Memories(ctx, user.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(mems) != 1 || mems[0].ID != kept.ID || mems[0].Fact != "Lives in Lisbon" {
		t.Errorf("memories stored: %+v, want only the edited one", mems)
	}
}
