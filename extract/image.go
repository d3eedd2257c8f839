package extract

import (
	"bytes"
	"errors"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"

	"golang.org/x/image/webp"
)

// Bounds on an image's dimensions: beyond them decoding it could take
// gigabytes (a decompression bomb), whatever the file's size.
const (
	MaxImagePixels = 50_000_000
	MaxImageSide   = 20_000
)

// ErrNotImage is returned for data that is none of the raster formats
// Weft decodes (PNG, JPEG, GIF, WebP).
var ErrNotImage = errors.New("not a PNG, JPEG, GIF or WebP image")

// ImageInfo is what an image's header says.
type ImageInfo struct {
	Format string // "PNG", "JPEG", "GIF" or "WebP", for messages
	MIME   string
	Width  int
	Height int
}

// Bomb reports whether the image's dimensions are beyond MaxImageSide or
// MaxImagePixels, or empty.
func (i ImageInfo) Bomb() bool {
	return i.Width > MaxImageSide || i.Height > MaxImageSide || int64(i.Width)*int64(i.Height) > MaxImagePixels
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

// ImageHeader reads an image's format and dimensions from its header only,
// in the calling process: the decoders' DecodeConfig read a bounded
// header (PNG: its IHDR chunk; JPEG: up to the frame header; GIF: the
// screen descriptor; WebP: the VP8 frame header) and allocate nothing in
// proportion to the dimensions it claims, so a header declaring
// 100000 × 100000 costs nothing here and is refused by Bomb before any
// pixel is decoded. Data that is no raster image gives ErrNotImage (with
// a zero ImageInfo); a header that does not decode gives the ImageInfo's
// Format and MIME and the decoder's error.
func ImageHeader(data []byte) (ImageInfo, error) {
	f := imageFormat(data)
	if f == nil {
		return ImageInfo{}, ErrNotImage
	}
	info := ImageInfo{Format: f.name, MIME: f.mime}
	cfg, err := f.decodeConfig(bytes.NewReader(data))
	if err != nil {
		return info, err
	}
	info.Width, info.Height = cfg.Width, cfg.Height
	return info, nil
}

// checkImage is ImageHeader with its refusals as ReadErrors.
func checkImage(data []byte) (*rasterFormat, error) {
	info, err := ImageHeader(data)
	switch {
	case errors.Is(err, ErrNotImage):
		return nil, readErr(ErrUnsupported, "This file is not an image Weft can show (PNG, JPEG, GIF, WebP).")
	case err != nil:
		return nil, readErr(err, "The %s image cannot be read; it may be damaged.", info.Format)
	case info.Width <= 0 || info.Height <= 0:
		return nil, readErr(nil, "The %s image has no pixels.", info.Format)
	case info.Bomb():
		return nil, readErr(ErrTooLarge, "The image is %s × %s pixels; the limit is %d megapixels and %s pixels a side.",
			thousands(info.Width), thousands(info.Height), MaxImagePixels/1_000_000, thousands(MaxImageSide))
	}
	return imageFormat(data), nil
}
