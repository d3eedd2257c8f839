package extract

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"path"
	"strings"
	"unicode"
)

// DetectError is a file Detect refuses for a reason of its own (text named
// like a binary format); it wraps ErrUnsupported. Reason is for the user,
// without the list of formats.
type DetectError struct{ Reason string }

func (e *DetectError) Error() string       { return e.Reason + "; " + ErrUnsupported.Error() }
func (e *DetectError) Unwrap() error       { return ErrUnsupported }
func (e *DetectError) UserMessage() string { return e.Error() }

// Bounds on a ZIP's central directory for Detect, which reads it in the
// server's process: a Word document has a few dozen parts.
const (
	maxZipEntries   = 10_000
	maxZipDirectory = 4 << 20
)

// zipDirectoryBounded reads the end-of-central-directory record and tells
// whether the directory it declares is within the bounds (ZIP64 archives,
// which no Word document needs, are not).
func zipDirectoryBounded(data []byte) bool {
	const eocdLen = 22
	from := max(0, len(data)-eocdLen-0xffff)
	i := bytes.LastIndex(data[from:], []byte("PK\x05\x06"))
	if i < 0 || from+i+eocdLen > len(data) {
		return true // no directory: zip.NewReader fails at once
	}
	eocd := data[from+i:]
	entries := binary.LittleEndian.Uint16(eocd[10:])
	size := binary.LittleEndian.Uint32(eocd[12:])
	return entries != 0xffff && size != 0xffffffff && entries <= maxZipEntries && size <= maxZipDirectory
}

// Detect decides a document's format from its full content: the content is
// sniffed first (the %PDF- signature, a ZIP holding a Word document, a page
// that starts like HTML), then the file name's extension classifies text:
// .md and .markdown are Markdown, .csv is CSV, .html and .htm are HTML, and
// anything else that decodes as text is plain text. A name is never trusted
// on its own: binary content that is none of the formats, and text named
// like a binary format (a .pdf or .docx holding text), give an error
// wrapping ErrUnsupported whose message names the supported formats.
func Detect(name string, data []byte) (string, error) {
	ext := strings.ToLower(path.Ext(strings.ReplaceAll(name, `\`, "/")))
	switch {
	case pdfStart(data) >= 0:
		return FormatPDF, nil
	case bytes.HasPrefix(data, []byte("PK\x03\x04")) || bytes.HasPrefix(data, []byte("PK\x05\x06")):
		if !zipDirectoryBounded(data) {
			// zip.NewReader reads the whole central directory in this
			// process (3 bytes of memory per byte of it).
			return "", &DetectError{Reason: "this ZIP file has too many parts to be a Word document"}
		}
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err == nil && docxMain(zr) != nil {
			return FormatDOCX, nil
		}
		if ext == ".docx" {
			return "", &DetectError{Reason: "this .docx file is not a Word document"}
		}
		return "", ErrUnsupported
	case !looksLikeText(data):
		return "", ErrUnsupported
	case startsLikeHTML(data):
		return FormatHTML, nil
	}
	switch ext {
	case ".md", ".markdown", ".mdown", ".mkd":
		return FormatMarkdown, nil
	case ".csv":
		return FormatCSV, nil
	case ".html", ".htm", ".xhtml":
		return FormatHTML, nil
	}
	if binaryExt[ext] {
		return "", &DetectError{Reason: fmt.Sprintf("this %s file holds plain text, not what its name says", ext)}
	}
	return FormatText, nil
}

// binaryExt are extensions of binary formats: a file named so that turns
// out to hold text is refused rather than indexed as garbage.
var binaryExt = map[string]bool{
	".pdf": true, ".docx": true, ".doc": true, ".docm": true, ".dotx": true, ".odt": true, ".rtf": true,
	".xls": true, ".xlsx": true, ".ods": true, ".ppt": true, ".pptx": true, ".odp": true, ".epub": true,
	".zip": true, ".gz": true, ".tgz": true, ".bz2": true, ".xz": true, ".7z": true, ".rar": true, ".tar": true,
	".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".webp": true, ".bmp": true, ".tif": true, ".tiff": true, ".ico": true, ".heic": true,
	".exe": true, ".dll": true, ".so": true, ".dylib": true, ".bin": true, ".wasm": true, ".class": true, ".jar": true,
	".mp3": true, ".mp4": true, ".wav": true, ".ogg": true, ".flac": true, ".mov": true, ".avi": true, ".mkv": true, ".webm": true,
	".sqlite": true, ".db": true,
}

// pdfStart is the offset of the %PDF- signature, or -1. Readers accept up
// to 1 KB of binary junk before it (a MacBinary header, say); text before
// it is a text file that mentions the signature.
func pdfStart(data []byte) int {
	i := bytes.Index(data[:min(len(data), 1024)], []byte("%PDF-"))
	if i > 0 && looksLikeText(data[:i]) {
		return -1
	}
	return i
}

// binaryMagic are signatures of common binary files whose first bytes might
// otherwise pass for (Latin-1) text.
var binaryMagic = [][]byte{
	[]byte("\x89PNG"), []byte("\xff\xd8\xff"), []byte("GIF8"), []byte("\x7fELF"), []byte("MZ"),
	[]byte("\x1f\x8b"), []byte("BZh"), []byte("7z\xbc\xaf"), []byte("Rar!"), []byte("\xfd7zXZ"),
	[]byte("\xd0\xcf\x11\xe0"), []byte("\xca\xfe\xba\xbe"), []byte("\xcf\xfa\xed\xfe"), []byte("\x00asm"),
	[]byte("SQLite format 3"), []byte("RIFF"), []byte("OggS"), []byte("ID3"), []byte("fLaC"), []byte("{\\rtf"),
}

// looksLikeText reports whether data decodes as text (see decodeText)
// with at most a few stray control characters in its first 8 KB: binary
// data is full of them (NULs, DEL, C1 controls), text almost never has any.
func looksLikeText(data []byte) bool {
	for _, m := range binaryMagic {
		if bytes.HasPrefix(data, m) {
			return false
		}
	}
	if len(data) >= 12 && string(data[4:8]) == "ftyp" { // MP4, MOV, HEIC
		return false
	}
	runes, ctl := 0, 0
	for _, c := range decodeText(data[:min(len(data), 8<<10)]) {
		runes++
		if unicode.IsControl(c) && !strings.ContainsRune("\t\n\r\f\v\x1b", c) {
			ctl++
		}
	}
	return ctl*100 <= runes // "Strip NULs": a few stray ones are tolerated
}

// startsLikeHTML reports whether text clearly is an HTML page: after a byte
// order mark, blanks, an XML declaration and comments it starts with
// <!doctype html or <html.
func startsLikeHTML(data []byte) bool {
	head := decodeText(data[:min(len(data), 4<<10)])
	s := strings.ToLower(strings.TrimSpace(head))
	for {
		switch {
		case strings.HasPrefix(s, "<?xml"):
			s = afterNext(s, "?>")
		case strings.HasPrefix(s, "<!--"):
			s = afterNext(s, "-->")
		default:
			return strings.HasPrefix(s, "<!doctype html") || strings.HasPrefix(s, "<html")
		}
	}
}

func afterNext(s, sep string) string {
	_, after, ok := strings.Cut(s, sep)
	if !ok {
		return ""
	}
	return strings.TrimSpace(after)
}
