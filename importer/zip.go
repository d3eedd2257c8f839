package importer

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"path"
	"strings"
)

// MaxZipEntries bounds the entries of an uploaded .zip: ChatGPT's export
// holds conversations.json, chat.html and the files of the conversations.
const MaxZipEntries = 20_000

// IsZip reports whether a file starts like a ZIP archive.
func IsZip(prefix []byte) bool { return bytes.HasPrefix(prefix, []byte("PK\x03\x04")) }

// ErrNoConversations refuses a .zip without a conversations.json.
var ErrNoConversations = errors.New("this .zip holds no conversations.json: upload ChatGPT's data export as it was sent, or the conversations.json inside it")

// ErrBadZip refuses an archive Weft will not open.
var ErrBadZip = errors.New("this .zip cannot be read, or has too many entries")

// OpenZip finds conversations.json in ChatGPT's data export (a .zip) and
// returns its content, decompressed as it is read. The entry count is read
// from the archive's end record and capped before archive/zip lists them
// (each listed entry costs memory); what the entry decompresses to is
// capped by the caller (Start refuses more than Limits.MaxBytes), so a
// zip bomb costs a bounded read.
func OpenZip(r io.ReaderAt, size int64) (io.ReadCloser, error) {
	if n, ok := zipEntries(r, size); !ok || n > MaxZipEntries {
		return nil, ErrBadZip
	}
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, ErrBadZip
	}
	var best *zip.File
	for _, f := range zr.File {
		name := path.Clean(strings.ReplaceAll(f.Name, `\`, "/"))
		if path.Base(name) != "conversations.json" || f.FileInfo().IsDir() {
			continue
		}
		// The one nearest the top (the export has it at the root).
		if best == nil || strings.Count(name, "/") < strings.Count(path.Clean(best.Name), "/") {
			best = f
		}
	}
	if best == nil {
		return nil, ErrNoConversations
	}
	if best.Method != zip.Store && best.Method != zip.Deflate {
		return nil, ErrBadZip
	}
	rc, err := best.Open()
	if err != nil {
		return nil, ErrBadZip
	}
	return zipEntry{rc}, nil
}

// zipEntry is conversations.json as it is decompressed: data that is not
// what the archive says (corrupt, a wrong checksum, a size that lies) is
// ErrBadZip, a refusal, not a failure of the server.
type zipEntry struct{ io.ReadCloser }

func (z zipEntry) Read(p []byte) (int, error) {
	n, err := z.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = ErrBadZip
	}
	return n, err
}

// zipEntries reads the entry count of the archive's end record (it is in
// the last 64 KiB + 22 bytes); a ZIP64 archive (more than 65,535 entries)
// is refused.
func zipEntries(r io.ReaderAt, size int64) (int, bool) {
	n := min(size, 65535+22)
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, size-n); err != nil && err != io.EOF {
		return 0, false
	}
	i := bytes.LastIndex(buf, []byte("PK\x05\x06"))
	if i < 0 || len(buf)-i < 22 {
		return 0, false
	}
	count := binary.LittleEndian.Uint16(buf[i+10:])
	if count == 0xFFFF {
		return 0, false
	}
	return int(count), true
}
