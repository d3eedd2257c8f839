package media

import (
	"errors"
	"testing"
	"time"
)

// FuzzSniff: whatever the file, Sniff answers quickly with what it is or
// a refusal, and an image it accepts is within the pixel caps (Sniff
// reads headers only, so a declared 100000 × 100000 costs nothing).
func FuzzSniff(f *testing.F) {
	f.Add("a.png", []byte("\x89PNG\r\n\x1a\n"))
	f.Add("a.txt", []byte("words"))
	f.Add("a.svg", []byte("<svg/>"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		start := time.Now()
		s, err := Sniff(name, data)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("Sniff took %v", d)
		}
		switch {
		case err != nil && !errors.Is(err, ErrRefused):
			t.Fatalf("error %v is no refusal", err)
		case err == nil && s.Kind == KindImage && (s.Width > MaxImageSide || s.Height > MaxImageSide || int64(s.Width)*int64(s.Height) > MaxImagePixels):
			t.Fatalf("accepted a %d × %d image", s.Width, s.Height)
		case err == nil && s.Kind != KindImage && s.Kind != KindDocument:
			t.Fatalf("Sniff = %+v", s)
		}
	})
}
