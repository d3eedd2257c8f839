package extract

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/png"

	"golang.org/x/image/draw"
)

// DefaultThumbSide is the longest side of a thumbnail.
const DefaultThumbSide = 256

// ThumbnailInProcess decodes an image in the calling process (after the
// checks of ImageHeader: a known raster format, a header that decodes,
// dimensions that are no bomb), scales it to fit in maxSide × maxSide
// (default DefaultThumbSide) keeping its aspect, turns a JPEG the way its
// EXIF orientation says, and encodes it as PNG. An image already small
// enough keeps its size. A GIF gives its first frame. Refusals are
// *ReadErrors. A full decode costs up to 8 bytes a pixel (400 MB for a
// 16-bit PNG of MaxImagePixels), so this is for the jail's child and for
// fuzzing only: everything else calls Thumbnail.
func ThumbnailInProcess(data []byte, maxSide int) (pngData []byte, err error) {
	if maxSide <= 0 {
		maxSide = DefaultThumbSide
	}
	f, err := checkImage(data)
	if err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			pngData, err = nil, readErr(fmt.Errorf("panic: %v", p), "The %s image cannot be read; it may be damaged.", f.name)
		}
	}()
	src, err := f.decode(bytes.NewReader(data))
	if err != nil {
		return nil, readErr(err, "The %s image cannot be read; it may be damaged.", f.name)
	}
	orient := 1
	if f == formatJPEG {
		orient = jpegOrientation(data)
	}
	sb := src.Bounds()
	w, h := fitIn(sb.Dx(), sb.Dy(), maxSide)
	var dst *image.NRGBA
	if w == sb.Dx() && h == sb.Dy() {
		dst = image.NewNRGBA(image.Rect(0, 0, w, h))
		draw.Draw(dst, dst.Bounds(), src, sb.Min, draw.Src)
	} else {
		// Catmull-Rom over a huge source costs in proportion to its
		// pixels; a cheap bilinear pass to twice the target first keeps
		// the cost bounded and the result as sharp.
		if sb.Dx() > 4*w && sb.Dy() > 4*h {
			mid := image.NewNRGBA(image.Rect(0, 0, 2*w, 2*h))
			draw.ApproxBiLinear.Scale(mid, mid.Bounds(), src, sb, draw.Src, nil)
			src, sb = mid, mid.Bounds()
		}
		dst = image.NewNRGBA(image.Rect(0, 0, w, h))
		draw.CatmullRom.Scale(dst, dst.Bounds(), src, sb, draw.Src, nil)
	}
	var out bytes.Buffer
	if err := png.Encode(&out, orientImage(dst, orient)); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// fitIn scales w × h to fit in side × side, keeping the aspect; never up.
func fitIn(w, h, side int) (int, int) {
	if w <= side && h <= side {
		return w, h
	}
	if w >= h {
		return side, max(1, (h*side+w/2)/w)
	}
	return max(1, (w*side+h/2)/h), side
}

// orientImage applies an EXIF orientation (1-8) to img.
func orientImage(img *image.NRGBA, orient int) *image.NRGBA {
	if orient < 2 || orient > 8 {
		return img
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	ow, oh := w, h
	if orient >= 5 { // 5-8 swap the axes
		ow, oh = h, w
	}
	out := image.NewNRGBA(image.Rect(0, 0, ow, oh))
	for y := range h {
		for x := range w {
			var dx, dy int
			switch orient {
			case 2: // mirrored
				dx, dy = w-1-x, y
			case 3: // upside down
				dx, dy = w-1-x, h-1-y
			case 4: // mirrored upside down
				dx, dy = x, h-1-y
			case 5: // mirrored, turned
				dx, dy = y, x
			case 6: // turned a quarter clockwise to show
				dx, dy = h-1-y, x
			case 7:
				dx, dy = h-1-y, w-1-x
			case 8: // turned a quarter counter-clockwise to show
				dx, dy = y, w-1-x
			}
			si := img.PixOffset(b.Min.X+x, b.Min.Y+y)
			di := out.PixOffset(dx, dy)
			copy(out.Pix[di:di+4], img.Pix[si:si+4])
		}
	}
	return out
}

// jpegOrientation reads the EXIF orientation tag of a JPEG, or 1.
func jpegOrientation(data []byte) int {
	i := 2 // after SOI
	for i+4 <= len(data) {
		if data[i] != 0xff {
			return 1
		}
		marker := data[i+1]
		if marker == 0xd8 || marker == 0x01 || (marker >= 0xd0 && marker <= 0xd7) || marker == 0xff {
			i += 2
			if marker == 0xff {
				i--
			}
			continue
		}
		if marker == 0xda || marker == 0xd9 { // image data: no EXIF after this
			return 1
		}
		n := int(binary.BigEndian.Uint16(data[i+2:]))
		if n < 2 || i+2+n > len(data) {
			return 1
		}
		seg := data[i+4 : i+2+n]
		if marker == 0xe1 && bytes.HasPrefix(seg, []byte("Exif\x00\x00")) {
			return exifOrientation(seg[6:])
		}
		i += 2 + n
	}
	return 1
}

// exifOrientation finds tag 0x0112 in IFD0 of a TIFF-structured EXIF block.
func exifOrientation(t []byte) int {
	if len(t) < 8 {
		return 1
	}
	var bo binary.ByteOrder
	switch string(t[:2]) {
	case "II":
		bo = binary.LittleEndian
	case "MM":
		bo = binary.BigEndian
	default:
		return 1
	}
	ifd := int(bo.Uint32(t[4:]))
	if ifd < 8 || ifd+2 > len(t) {
		return 1
	}
	count := int(bo.Uint16(t[ifd:]))
	for k := range count {
		e := ifd + 2 + 12*k
		if e+12 > len(t) {
			return 1
		}
		if bo.Uint16(t[e:]) == 0x0112 && bo.Uint16(t[e+2:]) == 3 { // SHORT
			if v := int(bo.Uint16(t[e+8:])); v >= 1 && v <= 8 {
				return v
			}
			return 1
		}
	}
	return 1
}
