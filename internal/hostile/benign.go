package hostile

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
)

// The benign files beside the hostile ones: what the readers' tests in
// extract, media, rag and handlers expect to read well. They live here,
// with the hostile builders, so that every package builds a PDF, a ZIP or
// an image one way and a fix to a builder reaches all their tests.

// Picture is a w × h image, red on the left half, blue on the right.
func Picture(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			c := color.NRGBA{R: 255, A: 255}
			if x >= w/2 {
				c = color.NRGBA{B: 255, A: 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	return img
}

// PNGOf is Picture(w, h) as a PNG.
func PNGOf(w, h int) []byte {
	return encode(func(b *bytes.Buffer) error { return png.Encode(b, Picture(w, h)) })
}

// JPEGOf is Picture(w, h) as a JPEG.
func JPEGOf(w, h int) []byte {
	return encode(func(b *bytes.Buffer) error { return jpeg.Encode(b, Picture(w, h), nil) })
}

// GIFOf is Picture(w, h) as a GIF.
func GIFOf(w, h int) []byte {
	return encode(func(b *bytes.Buffer) error { return gif.Encode(b, Picture(w, h), nil) })
}

func encode(f func(*bytes.Buffer) error) []byte {
	var b bytes.Buffer
	if err := f(&b); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// WebP1x1 is a 1 × 1 lossy WebP (the standard library has no encoder).
func WebP1x1() []byte {
	b, err := base64.StdEncoding.DecodeString("UklGRiIAAABXRUJQVlA4IBYAAAAwAQCdASoBAAEADsD+JaQAA3AAAAAA")
	if err != nil {
		panic(err)
	}
	return b
}

// PNGHeader is a PNG signature and a valid IHDR chunk claiming w × h
// pixels, and nothing else: what a decompression bomb shows first.
func PNGHeader(w, h uint32) []byte {
	var ihdr bytes.Buffer
	ihdr.WriteString("IHDR")
	binary.Write(&ihdr, binary.BigEndian, w)
	binary.Write(&ihdr, binary.BigEndian, h)
	ihdr.Write([]byte{8, 2, 0, 0, 0}) // 8-bit truecolor
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	binary.Write(&b, binary.BigEndian, uint32(ihdr.Len()-4))
	b.Write(ihdr.Bytes())
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(ihdr.Bytes()))
	return b.Bytes()
}

// JPEGWithOrientation inserts an EXIF APP1 segment with the given
// orientation after a JPEG's SOI marker.
func JPEGWithOrientation(data []byte, orient uint16) []byte {
	var tiff bytes.Buffer
	tiff.WriteString("MM\x00\x2a")
	binary.Write(&tiff, binary.BigEndian, uint32(8)) // IFD0 offset
	binary.Write(&tiff, binary.BigEndian, uint16(1)) // one entry
	binary.Write(&tiff, binary.BigEndian, []uint16{0x0112, 3})
	binary.Write(&tiff, binary.BigEndian, uint32(1))
	binary.Write(&tiff, binary.BigEndian, []uint16{orient, 0})
	binary.Write(&tiff, binary.BigEndian, uint32(0)) // no next IFD
	seg := append([]byte("Exif\x00\x00"), tiff.Bytes()...)
	var b bytes.Buffer
	b.Write(data[:2])
	b.Write([]byte{0xff, 0xe1})
	binary.Write(&b, binary.BigEndian, uint16(len(seg)+2))
	b.Write(seg)
	b.Write(data[2:])
	return b.Bytes()
}

// PDFPages is a PDF with one page per content stream, all using Helvetica
// as /F1 through resources inherited from the page tree. Objects: 1
// catalog, 2 page tree, 3 font, then page and content pairs.
func PDFPages(contents ...string) []byte {
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", "", "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"}
	var kids []string
	for i, c := range contents {
		kids = append(kids, fmt.Sprintf("%d 0 R", 4+2*i))
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R >>", 5+2*i),
			PDFStream("", c))
	}
	objs[1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d /Resources << /Font << /F1 3 0 R >> >> >>", strings.Join(kids, " "), len(contents))
	return PDF(objs...)
}

// PDFStream is a stream object holding content, its dictionary entries
// dict (may be empty) and its /Length.
func PDFStream(dict, content string) string {
	if dict != "" {
		dict += " "
	}
	return fmt.Sprintf("<< %s/Length %d >>\nstream\n%s\nendstream", dict, len(content), content)
}
