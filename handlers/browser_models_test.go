package handlers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"weft/internal/fakeollama"
	"weft/internal/testenv"
)

// An administrator pulls a model on /admin/models: the progress bar
// advances live, survives a reload (and goes on advancing after it), and
// when the pull completes the model appears in the list without a reload.
func TestBrowserModelsPullWithLiveProgressThatSurvivesAReload(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	fake := pullFake(t) // qwen3:8b: layers of 40,000,000 and 1,000 bytes, 4 steps each
	app := testenv.Start(t, store, testenv.Options{Fake: fake})
	ctx := testenv.Browser(t, 120*time.Second)
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// progressAt waits until the pull's live state shows completed bytes.
	progressAt := func(status string, completed int64) chromedp.Action[chromedp.Void] {
		return waitFor(fmt.Sprintf(`(() => { const s = document.querySelector('[data-testid=pull-progress] [data-testid=pull-state]');
			return s && s.dataset.status === %q && s.dataset.completed === %q })()`, status, fmt.Sprint(completed)))
	}

	step("register the administrator",
		chromedp.Navigate(app.TS.URL+"/register"),
		typeInto(`input[name=email]`, "admin@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=register]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	fake.HoldPulls(3) // the manifest, then a quarter of the first layer
	step("pull a model by name",
		click(`[data-testid=models-link]`),
		chromedp.WaitVisible(css(`[data-testid=model-pull]`)),
		typeInto(`[data-testid=model-pull] input[name=name]`, "qwen3:8b"),
		click(`[data-testid=model-pull] button[type=submit]`),
		chromedp.WaitVisible(css(`[data-testid=pull-progress]`)),
		progressAt("running", 10_000_000),
		waitFor(`document.querySelector('[data-testid=pull-progress] [data-testid=pull-bytes]').textContent.includes("of 38.2 MB")`),
		waitFor(`document.querySelector('[data-testid=pull-progress] progress').value === 10000000`),
	)
	fake.HoldPulls(5) // three quarters
	step("the progress advances live", progressAt("running", 30_000_000))
	step("a reload shows the pull where it is", chromedp.Reload(), progressAt("running", 30_000_000),
		waitFor(`document.querySelector('[data-testid=pull-progress] [data-testid=pull-layer]').textContent.includes("layer 1")`))
	fake.HoldPulls(7) // the first layer whole, the second begun
	step("after the reload it still advances live", progressAt("running", 40_000_000),
		waitFor(`document.querySelector('[data-testid=pull-progress] [data-testid=pull-layer]').textContent.includes("layer 2")`))
	fake.ReleasePulls()
	step("it completes and the model appears in the list",
		progressAt("completed", 40_001_000),
		waitFor(`document.querySelector('#model-list [data-testid=model-row][data-model="qwen3:8b"]')`),
	)
}

// Cancel on a running pull's row stops it at the model server, and the
// row ends cancelled without a reload; the model never appears.
func TestBrowserModelsCancelAPull(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	fake := pullFake(t)
	app := testenv.Start(t, store, testenv.Options{Fake: fake})
	ctx := testenv.Browser(t, 90*time.Second)
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	fake.HoldPulls(3)
	step("register and pull",
		chromedp.Navigate(app.TS.URL+"/register"),
		typeInto(`input[name=email]`, "admin@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=register]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
		chromedp.Navigate(app.TS.URL+"/admin/models"),
		typeInto(`[data-testid=model-pull] input[name=name]`, "qwen3:8b"),
		click(`[data-testid=model-pull] button[type=submit]`),
		waitFor(`document.querySelector('[data-testid=pull-state]')?.dataset.completed === "10000000"`),
	)
	step("cancel it",
		click(`[data-testid=pull-progress] [data-testid=pull-cancel]`),
		waitFor(`document.querySelector('[data-testid=pull-state]')?.dataset.status === "cancelled"`),
	)
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fake.WaitPulls(wctx, func(p []fakeollama.PullRecord) bool { return len(p) == 1 && p[0].Cancelled }); err != nil {
		t.Fatalf("the model server's pull was not cancelled: %+v", fake.Pulls())
	}
	step("the model is not listed, the Cancel button is gone",
		waitFor(`!document.querySelector('[data-model="qwen3:8b"]') && !document.querySelector('[data-testid=pull-cancel]')`))
}
