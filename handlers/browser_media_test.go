package handlers_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"weft/internal/testenv"
)

// TestBrowserAttachAnImageAndAPDFThenReadTheAnswerAloud: files chosen in
// the composer reach a vision model (the image as an image, the PDF as
// text), show on the message, and the answer's read-aloud button produces
// audio that plays.
func TestBrowserAttachAnImageAndAPDFThenReadTheAnswerAloud(t *testing.T) {
	t.Parallel()
	u := newTreeUIWith(t, testenv.Options{DefaultModel: "vision"})
	dir := t.TempDir()
	img, pdf := filepath.Join(dir, "photo.png"), filepath.Join(dir, "plan.pdf")
	if err := os.WriteFile(img, testPNG(t, 320, 240), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pdf, testPDF("Launch on Tuesday"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := `[data-testid=composer] input[name=files]`
	u.act("send an image and a PDF", chromedp.Steps(
		setValue(trComposer, "What do these show?"),
		uploadFiles(files, []string{img, pdf}),
		click(`[data-testid=send]`),
	), `location.pathname.startsWith("/t/") && `+trLast+`?.dataset.status === "complete"`)
	u.wait("both attachments with the image's thumbnail", `document.querySelectorAll('[data-testid=attachment]').length === 2 &&
		document.querySelector('[data-testid=attachment][data-kind=image] img')?.naturalWidth > 0`)
	req := trRequestFor(t, u.app.Fake, "What do these show?\n\n[Attached document: plan.pdf]\nLaunch on Tuesday\n[End of plan.pdf]")
	if n := len(req.Messages[len(req.Messages)-1].Images); n != 1 {
		t.Errorf("the vision model got %d images", n)
	}
	if !strings.HasPrefix(u.str(trLast+`.querySelector('[data-testid=message-body]').textContent.trim()`), "You said: What do these show?") {
		t.Errorf("no answer to the question")
	}

	// In the thread the composer sends through htmx: a file still goes.
	u.do("send a file in the thread",
		setValue(trComposer, "And this note?"),
		uploadFiles(files, []string{pdf}),
		click(`[data-testid=send]`),
		waitFor(trAnswers+`.length === 2 && `+trLast+`.dataset.status === "complete"`),
	)
	if n := u.num(`document.querySelectorAll('[data-testid=attachment]').length`); n != 3 {
		t.Errorf("%d attachments shown after the second send, want 3", n)
	}
	if got := u.num(`document.querySelector('[data-testid=composer] input[name=files]').files.length`); got != 0 {
		t.Errorf("the composer kept %d files after sending", got)
	}

	// Read aloud: audio appears on the answer and plays.
	u.do("read the answer aloud", chromedp.Evaluate[chromedp.Void](trLast+`.querySelector('[data-testid=read-aloud]').click()`),
		waitFor(trLast+`.querySelector('[data-testid=media][data-status=ready] audio')`))
	u.wait("the audio plays", `(a => { if (a.paused) a.play(); return a.duration > 0 && a.currentTime > 0 })(`+
		trLast+`.querySelector('[data-testid=media] audio'))`)
}
