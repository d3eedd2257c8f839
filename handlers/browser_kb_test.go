package handlers_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/rag"
)

// A person creates a knowledge base, uploads a document, watches it being
// indexed, asks a question and opens the passage the answer cites.
func TestBrowserKnowledgeBaseFromUploadToCitation(t *testing.T) {
	t.Parallel()
	fake := fakeollama.New(t, fakeollama.WithEmbedDelay(400*time.Millisecond))
	fake.SetScript(citingScript)
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{Fake: fake, RAG: rag.Config{EmbedBatch: 2}})
	u := &trUI{t: t, ctx: testenv.Browser(t, 90*time.Second), app: app}
	u.do("register",
		chromedp.Navigate(app.TS.URL+"/register"),
		typeInto(`input[name=email]`, "kb@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=register]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	u.open("/kb", `document.querySelector('[data-testid=kb-create]')`)
	u.act("create a knowledge base", chromedp.Steps(
		setValue(`[data-testid=kb-create] input[name=name]`, "Travel"),
		click(`[data-testid=kb-create] button[type=submit]`),
	), `location.pathname.startsWith("/kb/") && document.querySelector('[data-testid=kb-upload]')`)

	dir := t.TempDir()
	var guide strings.Builder
	guide.WriteString(tramGuide)
	// Enough sections for several embedding batches (2 chunks each, 0.4 s
	// per batch), so that progress can be seen.
	for i, city := range []string{"Porto", "Braga", "Coimbra", "Faro", "Évora", "Sintra", "Aveiro", "Tomar", "Lagos", "Viseu"} {
		guide.WriteString("\n## " + city + "\n\n")
		for j := range 8 {
			guide.WriteString(fmt.Sprintf("%s (note %d.%d) is worth a day; its old town is best seen on foot, early in the morning, before the tour buses. ", city, i, j))
		}
		guide.WriteString("\n")
	}
	file := filepath.Join(dir, "lisbon.md")
	if err := os.WriteFile(file, []byte(guide.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	mustChunk := `document.querySelector('[data-testid=kb-document]')`
	u.act("upload", chromedp.Steps(
		uploadFiles(`[data-testid=kb-upload] input[name=files]`, []string{file}),
		click(`[data-testid=kb-upload] button[type=submit]`),
	), mustChunk)
	u.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__kbSame = true`))
	// Ingestion shows its progress live, then the document is ready.
	u.wait("progress", `document.querySelector('[data-testid=kb-document][data-status=processing] progress') ||
		document.querySelector('[data-testid=kb-document][data-status=ready]')`)
	sawProgress := u.yes(`document.querySelector('[data-testid=kb-document][data-status=processing] progress')`)
	u.wait("ready", `document.querySelector('[data-testid=kb-document][data-status=ready]')`)
	if !sawProgress {
		t.Errorf("the document never showed its progress while being indexed")
	}
	if !u.yes(`window.__kbSame`) {
		t.Errorf("the page had to be reloaded to follow ingestion")
	}
	if got := u.str(mustChunk + `.textContent`); !strings.Contains(got, "lisbon.md") {
		t.Errorf("the document row does not show the file name: %q", got)
	}

	// Ask from a new thread with the knowledge base ticked in the composer.
	u.open("/", `document.querySelector('[data-testid=kb-pick]')`)
	u.act("ask", chromedp.Steps(
		click(`[data-testid=composer] input[name=kb]`),
		setValue(trComposer, "Which tram goes through Alfama?"),
		click(`[data-testid=send]`),
	), `location.pathname.startsWith("/t/") && `+trLast+`?.dataset.status === "complete" && `+trLast+`.querySelector('[data-testid=citation]')`)
	if got := u.str(trLast + `.dataset.route`); got != "rag" {
		t.Errorf("the answer's route is %q, want rag", got)
	}
	doc := u.str(trLast + `.querySelector('[data-testid=citation]').dataset.documentId`)
	u.act("open the citation", click(`[data-testid=message][data-role=assistant] [data-testid=citation]`),
		`document.querySelector('[data-testid=source]')`)
	for _, want := range []string{"lisbon.md", "Tram 28 climbs from Martim Moniz", "Trams"} {
		if !u.yes(`document.querySelector('[data-testid=source]').textContent.includes(` + jsString(want) + `)`) {
			t.Errorf("the source page does not show %q", want)
		}
	}
	if doc == "" {
		t.Errorf("the citation does not name its document")
	}
}

func jsString(s string) string { return "`" + strings.ReplaceAll(s, "`", "\\`") + "`" }
