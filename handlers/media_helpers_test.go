package handlers_test

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"mime/multipart"
	"net/http"
	"net/url"
	"sort"
	"testing"

	"weft/internal/hostile"
	"weft/internal/testenv"
)

// testPNG is a real w×h PNG.
func testPNG(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, color.RGBA{R: uint8(x * 255 / w), G: uint8(y * 255 / h), B: 128, A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// testPDF is a one-page PDF whose page says text.
func testPDF(text string) []byte {
	return hostile.PDFPages("BT /F1 12 Tf 72 700 Td (" + text + ") Tj ET")
}

// sendFiles posts the composer with files (name → content) to path.
func sendFiles(t *testing.T, c *testenv.Client, path string, fields url.Values, files map[string][]byte) testenv.Response {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, vs := range fields {
		for _, v := range vs {
			mw.WriteField(k, v)
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		w, err := mw.CreateFormFile("files", n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(files[n])
	}
	mw.Close()
	req, err := http.NewRequest(http.MethodPost, c.Base+path, &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return c.Send(req)
}
