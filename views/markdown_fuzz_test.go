package views

import (
	"testing"
	"unicode/utf8"
)

// FuzzRenderMarkdown: any text renders without panicking to inert HTML (no
// script, event-handler, style or htmx attributes, only http(s)/mailto
// URLs, no raw newline) of a size linear in the text's. The seeds
// (testdata/fuzz/FuzzRenderMarkdown, written by go run ./internal/fuzzseeds)
// are the hostile and pathological inputs of the other tests.
func FuzzRenderMarkdown(f *testing.F) {
	for _, h := range hostileMarkdown {
		f.Add(h.src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		out := RenderMarkdown(src)
		if len(out) > outputBound(len(src)) {
			t.Fatalf("%d bytes of output for %d of input", len(out), len(src))
		}
		if !utf8.ValidString(src) {
			return // the browser's decoder, not ours, reads broken UTF-8; the checks below parse as it would
		}
		assertInertWith(t, out, true)
	})
}
