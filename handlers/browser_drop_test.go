package handlers_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"weft/internal/testenv"
)

// dropJS drops one text file named name on the element matching sel, as a
// person dragging it from their desktop would, and reports whether the
// element was marked "dropping" while the file was dragged over it.
func dropJS(sel, name string) string {
	return fmt.Sprintf(`(() => {
		const dt = new DataTransfer();
		dt.items.add(new File(["# Dropped\n\nA few words about trams."], %s, {type: "text/markdown"}));
		const el = document.querySelector(%s);
		el.dispatchEvent(new DragEvent("dragover", {bubbles: true, cancelable: true, dataTransfer: dt}));
		const marked = el.classList.contains("dropping");
		el.dispatchEvent(new DragEvent("drop", {bubbles: true, cancelable: true, dataTransfer: dt}));
		return marked && !el.classList.contains("dropping");
	})()`, strconv.Quote(name), strconv.Quote(sel))
}

// A file dropped on the composer joins the files sent with the message; a
// file dropped on a knowledge base's upload form is uploaded at once.
func TestBrowserDroppedFilesJoinTheComposerAndUploadToAKnowledgeBase(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	u := &trUI{t: t, ctx: testenv.Browser(t, 60*time.Second), app: app}
	u.do("register",
		chromedp.Navigate(app.TS.URL+"/register"),
		typeInto(`input[name=email]`, "drop@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=register]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	if !u.yes(dropJS(`[data-testid=composer]`, "notes.md")) {
		t.Errorf("the composer was not marked while a file was dragged over it")
	}
	u.wait("the dropped file is listed", `document.querySelector('[data-testid=composer] [data-file-list]').textContent.includes("notes.md") &&
		document.querySelector('[data-testid=composer] input[name=files]').files.length === 1`)

	u.open("/kb", `document.querySelector('[data-testid=kb-create]')`)
	u.act("create a knowledge base", chromedp.Steps(
		setValue(`[data-testid=kb-create] input[name=name]`, "Dropped"),
		click(`[data-testid=kb-create] button[type=submit]`),
	), `location.pathname.startsWith("/kb/") && document.querySelector('[data-testid=kb-upload]')`)
	u.act("drop a file on the upload form", chromedp.Evaluate[chromedp.Void](dropJS(`[data-testid=kb-upload]`, "dropped.md")),
		`document.querySelector('[data-testid=kb-document]')`)
	if got := u.str(`document.querySelector('[data-testid=kb-document]').textContent`); !strings.Contains(got, "dropped.md") {
		t.Errorf("the uploaded document's row reads %q, want dropped.md", got)
	}
}
