package handlers_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"weft/internal/testenv"
	"weft/rag"
)

// webSite is a local web server with pages a test can change.
type webSite struct {
	*httptest.Server
	mu    sync.Mutex
	pages map[string]string // path → body (HTML, or XML for .xml)
}

func newWebSite(t *testing.T) *webSite {
	t.Helper()
	s := &webSite{pages: map[string]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		body, ok := s.pages[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		if strings.HasSuffix(r.URL.Path, ".xml") {
			w.Header().Set("Content-Type", "application/xml")
		} else {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
		}
		fmt.Fprint(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *webSite) set(path, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages[path] = body
}

func webPage(title, text string) string {
	return "<!doctype html><html><head><title>" + title + "</title></head><body><h1>" + title + "</h1><p>" + text + "</p></body></html>"
}

// A person adds a web page to a knowledge base and sees it become ready,
// re-fetches it after it changed, then adds a site's pages from its
// sitemap — without reloading the page while the server works.
func TestBrowserKnowledgeBaseFromTheWeb(t *testing.T) {
	t.Parallel()
	site := newWebSite(t)
	site.set("/guide", webPage("Tram guide", "Tram 28 climbs from Martim Moniz through Alfama."))
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{RAG: rag.Config{
		Web: rag.Config{}.Web.AllowForTest(netip.MustParseAddrPort(site.Listener.Addr().String()))}})
	u := &trUI{t: t, ctx: testenv.Browser(t, 90*time.Second), app: app}
	u.do("register",
		chromedp.Navigate(app.TS.URL+"/register"),
		typeInto(`input[name=email]`, "web@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=register]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	u.open("/kb", `document.querySelector('[data-testid=kb-create]')`)
	u.act("create a knowledge base", chromedp.Steps(
		setValue(`[data-testid=kb-create] input[name=name]`, "Lisbon"),
		click(`[data-testid=kb-create] button[type=submit]`),
	), `document.querySelector('[data-testid=kb-web]')`)

	row := `document.querySelector('[data-testid=kb-document]')`
	u.act("add the page", chromedp.Steps(
		setValue(`[data-testid=kb-web] input[name=url]`, site.URL+"/guide"),
		click(`[data-testid=kb-web] button[type=submit]`),
	), row)
	u.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__kbSame = true`))
	u.wait("the page ready", `document.querySelector('[data-testid=kb-document][data-status=ready] [data-testid=kb-refetch]')`)
	if got := u.str(row + `.textContent`); !strings.Contains(got, "Tram guide") || !strings.Contains(got, site.URL+"/guide") {
		t.Errorf("the row does not show the page's title and address: %q", got)
	}

	site.set("/guide", webPage("Tram and funicular guide", "The Glória funicular climbs to Bairro Alto."))
	u.act("re-fetch", click(`[data-testid=kb-refetch]`), row)
	u.do("mark the page again", chromedp.Evaluate[chromedp.Void](`window.__kbSame = true`))
	u.wait("the new version", `document.querySelector('[data-testid=kb-document][data-status=ready] [data-testid=kb-refetch]') &&
		`+row+`.textContent.includes("Tram and funicular guide")`)

	site.set("/sitemap.xml", `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`+
		`<url><loc>`+site.URL+`/belem</loc></url><url><loc>`+site.URL+`/sintra</loc></url><url><loc>https://elsewhere.example/</loc></url></urlset>`)
	site.set("/belem", webPage("Belém", "Pastéis de nata are best warm."))
	site.set("/sintra", webPage("Sintra", "Pena Palace sits above the town."))
	u.act("add the sitemap", chromedp.Steps(
		setValue(`[data-testid=kb-web] input[name=url]`, site.URL+"/sitemap.xml"),
		setValue(`[data-testid=kb-web] select[name=scope]`, "sitemap"),
		click(`[data-testid=kb-web] button[type=submit]`),
	), `document.querySelector('[data-testid=kb-crawl]')`)
	u.do("mark the page once more", chromedp.Evaluate[chromedp.Void](`window.__kbSame = true`))
	u.wait("the sitemap's pages ready", `document.querySelector('[data-testid=kb-crawl][data-status=done]') &&
		document.querySelectorAll('[data-testid=kb-document][data-status=ready] [data-testid=kb-refetch]').length === 3`)
	if got := u.str(`document.querySelector('[data-testid=kb-crawl]').textContent`); !strings.Contains(got, "2 page(s) added") ||
		!strings.Contains(got, "1 on other sites") {
		t.Errorf("the crawl says %q", got)
	}
	if !u.yes(`window.__kbSame`) {
		t.Errorf("the page had to be reloaded to follow the crawl")
	}
}
