package media

import (
	"bytes"
	"encoding/xml"
	"errors"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"strings"

	"golang.org/x/image/webp"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"

	"weft/rag"
)

// Kinds of attachment.
const (
	KindImage    = "image"
	KindDocument = "document"
)

// Bounds on an image's dimensions: beyond them decoding it could take
// gigabytes (a decompression bomb), whatever the file's size.
const (
	MaxImagePixels = 50_000_000
	MaxImageSide   = 20_000
)

// accepted names what Weft takes, for refusals of anything else.
const accepted = "Weft accepts images (PNG, JPEG, GIF, WebP) and documents (PDF, DOCX, plain text, Markdown, CSV, HTML)"

// Sniffed is what a file turned out to be.
type Sniffed struct {
	Kind   string // KindImage or KindDocument
	MIME   string // from the content, e.g. image/png, application/pdf, text/html
	Format string // documents: the rag format (rag.FormatPDF, …); images: empty
	Width  int    // images: pixels
	Height int
}

// Sniff decides what a file is from its content; the name only classifies
// text documents (.md, .csv, …) and is never trusted on its own. A raster
// image (PNG, JPEG, GIF, WebP) must decode its header and stay within
// MaxImagePixels and MaxImageSide; SVG is refused wherever it hides; a
// page of HTML is a document, whatever its name says. Anything else that
// rag cannot read is refused. Refusals wrap ErrRefused and name the file.
//
// HTML is reported with MIME text/html: it must be served, like every
// document, as an attachment with nosniff (DESIGN.md §10), never inline.
func Sniff(name string, data []byte) (Sniffed, error) {
	shown := displayName(name)
	if len(data) == 0 {
		return Sniffed{}, refuse(nil, "%s is empty.", shown)
	}
	if f := imageFormat(data); f != nil {
		return sniffImage(shown, f, data)
	}
	if isSVG(data) {
		return Sniffed{}, refuse(nil, "%s: SVG images are not accepted (they can carry scripts).", shown)
	}
	format, err := rag.Detect(name, data)
	if err != nil {
		// rag's message may lead with the reason ("this .pdf file holds
		// plain text, not what its name says"); keep it, then say what
		// is accepted.
		reason, ok := strings.CutSuffix(err.Error(), "; "+rag.ErrUnsupported.Error())
		if !ok || !errors.Is(err, rag.ErrUnsupported) {
			reason = "this kind of file is not accepted"
		}
		return Sniffed{}, refuse(err, "%s: %s. %s.", shown, reason, accepted)
	}
	return Sniffed{Kind: KindDocument, MIME: documentMIME[format], Format: format}, nil
}

var documentMIME = map[string]string{
	rag.FormatPDF:      "application/pdf",
	rag.FormatDOCX:     "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	rag.FormatHTML:     "text/html",
	rag.FormatMarkdown: "text/markdown",
	rag.FormatText:     "text/plain",
	rag.FormatCSV:      "text/csv",
}

// rasterFormat is a raster image format Weft accepts.
type rasterFormat struct {
	name         string // for messages
	mime         string
	decodeConfig func(io.Reader) (image.Config, error)
	decode       func(io.Reader) (image.Image, error) // GIF: its first frame
}

var (
	formatPNG  = &rasterFormat{"PNG", "image/png", png.DecodeConfig, png.Decode}
	formatJPEG = &rasterFormat{"JPEG", "image/jpeg", jpeg.DecodeConfig, jpeg.Decode}
	formatGIF  = &rasterFormat{"GIF", "image/gif", gif.DecodeConfig, gif.Decode}
	formatWebP = &rasterFormat{"WebP", "image/webp", webp.DecodeConfig, webp.Decode}
)

// imageFormat recognizes a raster image by its magic bytes, or gives nil.
// The decoders are called directly, not through image.Decode, so that a
// format registered by some other package is never accepted by accident.
func imageFormat(data []byte) *rasterFormat {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return formatPNG
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return formatJPEG
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return formatGIF
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return formatWebP
	}
	return nil
}

// sniffImage checks that an image's header decodes and that its
// dimensions are safe to decode.
func sniffImage(shown string, f *rasterFormat, data []byte) (Sniffed, error) {
	cfg, err := f.decodeConfig(bytes.NewReader(data))
	if err != nil {
		return Sniffed{}, refuse(err, "%s looks like a %s image but cannot be read; it may be damaged.", shown, f.name)
	}
	w, h := cfg.Width, cfg.Height
	switch {
	case w <= 0 || h <= 0:
		return Sniffed{}, refuse(nil, "%s is a %s image without pixels.", shown, f.name)
	case w > MaxImageSide || h > MaxImageSide || int64(w)*int64(h) > MaxImagePixels:
		return Sniffed{}, refuse(nil, "%s is %s × %s pixels; the limit is %d megapixels and %s pixels a side.",
			shown, thousands(w), thousands(h), MaxImagePixels/1_000_000, thousands(MaxImageSide))
	}
	return Sniffed{Kind: KindImage, MIME: f.mime, Width: w, Height: h}, nil
}

// isSVG reports whether data is an XML document whose root element is svg
// (in any namespace prefix or case, in UTF-8 or UTF-16): after a byte
// order mark, blanks, an XML declaration, comments and a doctype, the
// first element is <svg.
func isSVG(data []byte) bool {
	head := data[:min(len(data), 64<<10)]
	dec := xml.NewDecoder(transform.NewReader(bytes.NewReader(head), unicode.BOMOverride(transform.Nop)))
	dec.Strict = false
	dec.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	for {
		tok, err := dec.RawToken()
		if err != nil {
			return false
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return strings.EqualFold(t.Name.Local, "svg")
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return false
			}
		case xml.EndElement:
			return false
		}
	}
}
