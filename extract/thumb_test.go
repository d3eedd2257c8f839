package extract

import (
	"bytes"
	"errors"
	"image/color"
	"image/png"
	"testing"
	"weft/internal/hostile"
)

func TestThumbnailsFitTheirBoxKeepingTheAspect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		data    []byte
		maxSide int
		w, h    int
	}{
		{"a wide PNG fits the default 256", hostile.PNGOf(1000, 500), 0, 256, 128},
		{"a tall JPEG fits the box", hostile.JPEGOf(300, 900), 120, 40, 120},
		{"a GIF gives its first frame", hostile.GIFOf(512, 512), 64, 64, 64},
		{"a small image keeps its size", hostile.PNGOf(30, 20), 256, 30, 20},
		{"a thin image keeps at least a pixel", hostile.PNGOf(2000, 3), 100, 100, 1},
		{"a WebP is thumbnailed", hostile.WebP1x1(), 0, 1, 1},
		{"a big image goes through two passes", hostile.PNGOf(3000, 2000), 100, 100, 67},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := ThumbnailInProcess(tt.data, tt.maxSide)
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(out))
			if err != nil {
				t.Fatalf("the thumbnail is not a PNG: %v", err)
			}
			if b := img.Bounds(); b.Dx() != tt.w || b.Dy() != tt.h {
				t.Errorf("thumbnail is %d × %d, want %d × %d", b.Dx(), b.Dy(), tt.w, tt.h)
			}
		})
	}
}

func TestThumbnailKeepsTheColoursWhereTheyWere(t *testing.T) {
	t.Parallel()
	out, err := ThumbnailInProcess(hostile.PNGOf(400, 200), 100)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := png.Decode(bytes.NewReader(out))
	if !reddish(img.At(5, 25)) || !bluish(img.At(95, 25)) {
		t.Errorf("left %v and right %v; want red then blue", img.At(5, 25), img.At(95, 25))
	}
}

func TestThumbnailTurnsAJPEGTheWayItsEXIFSays(t *testing.T) {
	t.Parallel()
	// Stored 200 × 100, red left, blue right; orientation 6 means "turn a
	// quarter clockwise to show": 50 × 100 shown, red on top.
	data := hostile.JPEGWithOrientation(hostile.JPEGOf(200, 100), 6)
	out, err := ThumbnailInProcess(data, 100)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := png.Decode(bytes.NewReader(out))
	if b := img.Bounds(); b.Dx() != 50 || b.Dy() != 100 {
		t.Fatalf("thumbnail is %d × %d, want 50 × 100", b.Dx(), b.Dy())
	}
	if !reddish(img.At(25, 5)) || !bluish(img.At(25, 95)) {
		t.Errorf("top %v and bottom %v; want red then blue", img.At(25, 5), img.At(25, 95))
	}
	if info, err := ImageHeader(data); err != nil || info.Width != 200 {
		t.Errorf("ImageHeader of the EXIF JPEG = %+v, %v", info, err)
	}
}

func TestThumbnailRefusesWhatSniffRefuses(t *testing.T) {
	t.Parallel()
	for name, data := range map[string][]byte{
		"a bomb header":                        hostile.PNGHeader(100_000, 100_000),
		"garbage":                              append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 100)...),
		"a truncated PNG whose header is fine": hostile.PNGOf(64, 64)[:60],
		"a document":                           []byte("hello"),
		"an SVG":                               []byte("<svg/>"),
	} {
		var re *ReadError
		if _, err := ThumbnailInProcess(data, 0); !errors.As(err, &re) {
			t.Errorf("ThumbnailInProcess(%s) = %v, want a refusal", name, err)
		}
	}
}

func reddish(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return r > 0xc000 && g < 0x4000 && b < 0x4000
}

func bluish(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return b > 0xc000 && g < 0x4000 && r < 0x4000
}
