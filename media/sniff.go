package media

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"

	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"

	"weft/extract"
)

// Kinds of attachment.
const (
	KindImage    = "image"
	KindDocument = "document"
)

// Bounds on an image's dimensions (see extract).
const (
	MaxImagePixels = extract.MaxImagePixels
	MaxImageSide   = extract.MaxImageSide
)

// accepted names what Weft takes, for refusals of anything else.
const accepted = "Weft accepts images (PNG, JPEG, GIF, WebP) and documents (PDF, DOCX, plain text, Markdown, CSV, HTML)"

// Sniffed is what a file turned out to be.
type Sniffed struct {
	Kind   string // KindImage or KindDocument
	MIME   string // from the content, e.g. image/png, application/pdf, text/html
	Format string // documents: the extract format (extract.FormatPDF, …); images: empty
	Width  int    // images: pixels
	Height int
}

// Sniff decides what a file is from its content; the name only classifies
// text documents (.md, .csv, …) and is never trusted on its own. A raster
// image (PNG, JPEG, GIF, WebP) must decode its header and stay within
// MaxImagePixels and MaxImageSide; SVG is refused wherever it hides; a
// page of HTML is a document, whatever its name says. Anything else that
// extract cannot read is refused. Refusals wrap ErrRefused and name the file.
//
// HTML is reported with MIME text/html: it must be served, like every
// document, as an attachment with nosniff (DESIGN.md §10), never inline.
func Sniff(name string, data []byte) (Sniffed, error) {
	shown := displayName(name)
	if len(data) == 0 {
		return Sniffed{}, refuse(nil, "%s is empty.", shown)
	}
	if info, err := extract.ImageHeader(data); !errors.Is(err, extract.ErrNotImage) {
		return sniffImage(shown, info, err)
	}
	if isSVG(data) {
		return Sniffed{}, refuse(nil, "%s: SVG images are not accepted (they can carry scripts).", shown)
	}
	format, err := extract.Detect(name, data)
	if err != nil {
		// extract's message may lead with the reason ("this .pdf file holds
		// plain text, not what its name says"); keep it, then say what
		// is accepted.
		reason := "this kind of file is not accepted"
		var de *extract.DetectError
		if errors.As(err, &de) {
			reason = de.Reason
		}
		return Sniffed{}, refuse(err, "%s: %s. %s.", shown, reason, accepted)
	}
	return Sniffed{Kind: KindDocument, MIME: documentMIME[format], Format: format}, nil
}

var documentMIME = map[string]string{
	extract.FormatPDF:      "application/pdf",
	extract.FormatDOCX:     "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	extract.FormatHTML:     "text/html",
	extract.FormatMarkdown: "text/markdown",
	extract.FormatText:     "text/plain",
	extract.FormatCSV:      "text/csv",
}

// sniffImage checks that an image's header decoded (ImageHeader's answer
// is info, err) and that its dimensions are safe to decode; only the
// header is read here, the pixels are decoded in extract's jail.
func sniffImage(shown string, info extract.ImageInfo, err error) (Sniffed, error) {
	if err != nil {
		return Sniffed{}, refuse(err, "%s looks like a %s image but cannot be read; it may be damaged.", shown, info.Format)
	}
	w, h := info.Width, info.Height
	switch {
	case w <= 0 || h <= 0:
		return Sniffed{}, refuse(nil, "%s is a %s image without pixels.", shown, info.Format)
	case info.Bomb():
		return Sniffed{}, refuse(extract.ErrTooLarge, "%s is %s × %s pixels; the limit is %d megapixels and %s pixels a side.",
			shown, thousands(w), thousands(h), MaxImagePixels/1_000_000, thousands(MaxImageSide))
	}
	return Sniffed{Kind: KindImage, MIME: info.MIME, Width: w, Height: h}, nil
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
