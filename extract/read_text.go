package extract

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
)

// decodeText turns bytes of unknown encoding into UTF-8: UTF-8 (a byte order
// mark is dropped; a few broken sequences among many good ones are
// replaced), UTF-16 with a byte order mark or recognizably without one, and
// otherwise Windows-1252, the superset of Latin-1 that old Windows files use.
func decodeText(data []byte) string {
	if rest, ok := bytes.CutPrefix(data, []byte("\xef\xbb\xbf")); ok {
		return strings.ToValidUTF8(string(rest), "\uFFFD")
	}
	switch utf16Order(data) {
	case 'L':
		return decodeUTF16(bytes.TrimPrefix(data, []byte("\xff\xfe")), false)
	case 'B':
		return decodeUTF16(bytes.TrimPrefix(data, []byte("\xfe\xff")), true)
	}
	if utf8.Valid(data) {
		return string(data)
	}
	if mostlyUTF8(data) {
		return strings.ToValidUTF8(string(data), "\uFFFD")
	}
	s, err := charmap.Windows1252.NewDecoder().Bytes(data)
	if err != nil { // Windows1252 maps every byte; kept for safety
		return strings.ToValidUTF8(string(data), "\uFFFD")
	}
	return string(s)
}

// mostlyUTF8 reports whether data's non-ASCII bytes are mostly well-formed
// UTF-8: a damaged UTF-8 file rather than a Latin-1 one, whose accented
// letters are almost never valid UTF-8 sequences.
func mostlyUTF8(data []byte) bool {
	good, bad := 0, 0
	for i := 0; i < len(data); {
		if data[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n == 1 {
			bad++
		} else {
			good++
		}
		i += n
	}
	return good > bad
}

// utf16Order is 'L' or 'B' for little- or big-endian UTF-16, 0 otherwise.
// Without a byte order mark it looks at the first 4 KB: text in UTF-16 that
// is mostly ASCII has a zero in every other byte.
func utf16Order(data []byte) byte {
	switch {
	case bytes.HasPrefix(data, []byte("\xff\xfe")) && !bytes.HasPrefix(data, []byte("\xff\xfe\x00\x00")):
		return 'L'
	case bytes.HasPrefix(data, []byte("\xfe\xff")):
		return 'B'
	}
	head := data[:min(len(data), 4<<10)&^1]
	if len(head) < 4 {
		return 0
	}
	var even, odd int
	for i := 0; i < len(head); i += 2 {
		if head[i] == 0 {
			even++
		}
		if head[i+1] == 0 {
			odd++
		}
	}
	pairs := len(head) / 2
	switch {
	case odd*10 >= pairs*4 && even*20 < pairs:
		return 'L'
	case even*10 >= pairs*4 && odd*20 < pairs:
		return 'B'
	}
	return 0
}

func decodeUTF16(b []byte, bigEndian bool) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		if bigEndian {
			u[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
		} else {
			u[i] = uint16(b[2*i+1])<<8 | uint16(b[2*i])
		}
	}
	return string(utf16.Decode(u))
}

// decodeChecked decodes text and refuses it early when it is over the limit.
func (r *reader) decodeChecked(data []byte) (string, error) {
	s := decodeText(data)
	if n := utf8.RuneCountInString(s); n > r.lim.MaxText {
		return "", r.count(n)
	}
	return s, nil
}

// readText reads plain text: one block per paragraph, paragraphs being
// separated by blank lines.
func readText(r *reader, data []byte) error {
	s, err := r.decodeChecked(data)
	if err != nil {
		return err
	}
	var para strings.Builder
	flush := func() error {
		err := r.emit(Block{Text: para.String()})
		para.Reset()
		return err
	}
	for line := range strings.Lines(strings.ReplaceAll(s, "\r\n", "\n")) {
		if strings.TrimSpace(line) == "" {
			if err := flush(); err != nil {
				return err
			}
			continue
		}
		para.WriteString(line)
	}
	return flush()
}

// csvBlockRunes bounds a CSV table block (header included); it matches the
// default ChunkOptions.TableMax so that each block is one chunk.
const csvBlockRunes = 3000

// readCSV reads a CSV file as table blocks of up to csvBlockRunes runes,
// each starting with the header row. The delimiter (comma, semicolon or
// tab) is guessed from the first line.
func readCSV(r *reader, data []byte) error {
	s, err := r.decodeChecked(data)
	if err != nil {
		return err
	}
	cr := csv.NewReader(strings.NewReader(s))
	cr.LazyQuotes = true
	cr.FieldsPerRecord = -1
	cr.Comma = csvDelimiter(s)

	var header string
	var rows strings.Builder
	size := 0
	flush := func() error {
		if rows.Len() == 0 {
			return nil
		}
		err := r.emit(Block{Text: header + "\n" + rows.String(), Table: true})
		rows.Reset()
		size = 0
		return err
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			line := 0
			if pe, ok := errors.AsType[*csv.ParseError](err); ok {
				line = pe.Line
			}
			return readErr(err, "The CSV file could not be read near line %d: it seems to be malformed.", line)
		}
		row := strings.TrimSpace(tableText([][]string{rec}))
		if row == "" {
			continue
		}
		if header == "" {
			header = row
			continue
		}
		n := utf8.RuneCountInString(row) + 1
		if size > 0 && utf8.RuneCountInString(header)+size+n > csvBlockRunes {
			if err := flush(); err != nil {
				return err
			}
		}
		rows.WriteString(row)
		rows.WriteByte('\n')
		size += n
	}
	if header != "" && size == 0 && len(r.blocks) == 0 { // a header and nothing else
		return r.emit(Block{Text: header, Table: true})
	}
	return flush()
}

// csvDelimiter picks the most frequent of comma, semicolon and tab in the
// first line (outside quotes), comma on a tie.
func csvDelimiter(s string) rune {
	line, _, _ := strings.Cut(s, "\n")
	counts := map[rune]int{}
	quoted := false
	for _, c := range line {
		switch {
		case c == '"':
			quoted = !quoted
		case !quoted && (c == ',' || c == ';' || c == '\t'):
			counts[c]++
		}
	}
	best := ','
	for _, c := range []rune{';', '\t'} {
		if counts[c] > counts[best] {
			best = c
		}
	}
	return best
}
