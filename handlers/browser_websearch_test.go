package handlers_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"weft/internal/testenv"
	"weft/rag"
)

// An administrator sets up the search service on /admin; the composer's
// "Search the web" switch, disabled with the reason until then, is
// ticked, and the answer cites the page found, whose source opens with its
// address as a link.
func TestBrowserAdminSetsUpWebSearchAndTheAnswerCitesThePage(t *testing.T) {
	t.Parallel()
	site := newCountingSite(t)
	site.set("/tram", tramPage)
	search := newFakeSearXNG(t)
	search.set(result(site.URL+"/tram", "Trams", "Tram 28"))
	o := testenv.Options{}
	o.RAG.Web = rag.Config{}.Web.AllowForTest(addrOf(site.Server))
	app := testenv.Start(t, testenv.NewDB(t), o)
	u := &trUI{t: t, ctx: testenv.Browser(t, 90*time.Second), app: app}
	u.do("register",
		chromedp.Navigate(app.TS.URL+"/register"),
		typeInto(`input[name=email]`, "admin-web@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=register]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	if !u.yes(`document.querySelector('[data-testid=web-toggle]').disabled`) ||
		u.str(`document.querySelector('[data-testid=web-reason]').textContent`) != rag.WebSearchOff {
		t.Errorf("before set-up the switch is not disabled with the reason")
	}

	u.open("/admin", `document.querySelector('[data-testid=web-search-form]')`)
	u.act("set up the search service", chromedp.Steps(
		setValue(`[data-testid=web-search-form] input[name=url]`, search.URL),
		setValue(`[data-testid=web-search-form] input[name=pages]`, "2"),
		click(`[data-testid=web-search-form] button[type=submit]`),
	), `document.querySelector('[data-testid=web-search-saved]')`)

	u.open("/", `document.querySelector('[data-testid=web-toggle]:not([disabled])')`)
	u.act("ask with the web", chromedp.Steps(
		click(`[data-testid=web-toggle]`),
		setValue(trComposer, "Which tram climbs through Alfama? [1]"),
		click(`[data-testid=send]`),
	), `location.pathname.startsWith("/t/") && `+trLast+`?.dataset.status === "complete" && `+trLast+`.querySelector('[data-testid=citation]')`)
	if got := u.str(trLast + `.dataset.route`); got != "rag" {
		t.Errorf("the answer's route is %q, want rag", got)
	}
	if got := u.str(trLast + `.querySelector('[data-testid=sources] [data-testid=citation]').textContent`); !strings.Contains(got, "Tram guide") {
		t.Errorf("the citation reads %q", got)
	}
	u.act("open the citation", click(`[data-testid=message][data-role=assistant] [data-testid=citation]`),
		`document.querySelector('[data-testid=source]')`)
	if !u.yes(`document.querySelector('[data-testid=source-text]').textContent.includes("Tram 28 climbs")`) {
		t.Errorf("the source page does not show the passage")
	}
	link := `document.querySelector('[data-testid=source-url]')`
	if u.str(link+`.href`) != site.URL+"/tram" || u.str(link+`.rel`) != "noopener noreferrer nofollow" {
		t.Errorf("the source's link is %q rel %q", u.str(link+`.href`), u.str(link+`.rel`))
	}
}
