package handlers_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ollama/ollama/api"

	"weft/internal/fakeollama"
	"weft/internal/testenv"
)

// A person turns query rewriting on in a knowledge base's settings, and
// the retrieval view then shows the queries the model searched.
func TestBrowserQueryRewritingIsTurnedOnInTheSettingsAndShownInTheRetrievalView(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	app.Fake.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		if len(req.Format) > 0 {
			return fakeollama.Reply{Chunks: []string{`{"queries":["tram 28 through Alfama"]}`}}
		}
		return fakeollama.DefaultReply(req)
	})
	u := &trUI{t: t, ctx: testenv.Browser(t, 60*time.Second), app: app}
	u.do("register",
		chromedp.Navigate(app.TS.URL+"/register"),
		typeInto(`input[name=email]`, "rewrite@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=register]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	u.open("/kb", `document.querySelector('[data-testid=kb-create]')`)
	u.act("create a knowledge base", chromedp.Steps(
		setValue(`[data-testid=kb-create] input[name=name]`, "Travel"),
		click(`[data-testid=kb-create] button[type=submit]`),
	), `location.pathname.startsWith("/kb/") && document.querySelector('[data-testid=kb-upload]')`)
	file := filepath.Join(t.TempDir(), "lisbon.md")
	if err := os.WriteFile(file, []byte(tramGuide), 0o644); err != nil {
		t.Fatal(err)
	}
	u.act("upload", chromedp.Steps(
		uploadFiles(`[data-testid=kb-upload] input[name=files]`, []string{file}),
		click(`[data-testid=kb-upload] button[type=submit]`),
	), `document.querySelector('[data-testid=kb-document]')`)
	u.wait("ready", `document.querySelector('[data-testid=kb-document][data-status=ready]')`)
	box := `document.querySelector('[data-testid=kb-rewrite]')`
	if u.yes(box + `.checked`) {
		t.Fatalf("query rewriting is on before anyone turned it on")
	}

	u.act("turn rewriting on", chromedp.Steps(
		trOpenDetails(`details.kb-settings`),
		click(`[data-testid=kb-rewrite]`),
		click(`[data-testid=kb-settings] button[type=submit]`),
	), `(document.querySelector('[data-testid=flash]')?.textContent ?? "").includes("Settings saved")`)
	if !u.yes(box + `.checked`) {
		t.Errorf("the saved page shows rewriting off")
	}
	u.act("search", chromedp.Steps(
		setValue(`[data-testid=kb-search] input[name=q]`, "Which streetcar line serves the old Moorish quarter?"),
		click(`[data-testid=kb-search] button[type=submit]`),
	), `document.querySelector('[data-testid=kb-queries]')`)
	if got := u.str(`[...document.querySelectorAll('[data-testid=kb-query]')].map(e => e.textContent).join("|")`); got != "tram 28 through Alfama" {
		t.Errorf("the retrieval view shows the queries %q", got)
	}
	if !u.yes(`document.querySelector('[data-testid=kb-result]')?.textContent.includes("Tram 28 climbs")`) {
		t.Errorf("the rewritten query's passage is not in the retrieval view")
	}

	u.act("turn rewriting off", chromedp.Steps(
		trOpenDetails(`details.kb-settings`),
		click(`[data-testid=kb-rewrite]`),
		click(`[data-testid=kb-settings] button[type=submit]`),
	), `(document.querySelector('[data-testid=flash]')?.textContent ?? "").includes("Settings saved")`)
	if u.yes(box + `.checked`) {
		t.Errorf("rewriting is still on after unticking it")
	}
}
