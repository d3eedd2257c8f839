package extract

import (
	"bytes"
	"regexp"
)

// goldmark takes time quadratic in the size of some constructs (100 KB of
// "[a](" costs it seconds, 800 KB minutes), and it cannot be interrupted.
// So a long document is parsed in parts: its blocks (separated by blank
// lines outside fenced code) are grouped up to mdGroup bytes, and a block
// longer than that is cut at line ends into parts of at most mdPart bytes,
// repeating a table's header rows or a code block's fences in every part.
// Reference-style links whose definition is in another part stay
// unresolved, which only changes how their text reads.
const (
	mdGroup = 32 << 10
	mdPart  = 4 << 10
)

// mdParts cuts Markdown into parts that goldmark parses in bounded time.
func mdParts(src []byte) [][]byte {
	if len(src) <= mdGroup {
		return [][]byte{src}
	}
	var out [][]byte
	start := 0 // of the current group
	for _, b := range mdBlocks(src) {
		if b[1]-b[0] > mdGroup {
			if b[0] > start {
				out = append(out, src[start:b[0]])
			}
			out = append(out, cutBlock(src[b[0]:b[1]])...)
			start = b[1]
			continue
		}
		if b[1]-start > mdGroup && b[0] > start {
			out = append(out, src[start:b[0]])
			start = b[0]
		}
	}
	if start < len(src) {
		out = append(out, src[start:])
	}
	return out
}

// mdBlocks returns the [start, end) offsets of the blocks of src: runs of
// lines ended by a blank line that is not inside fenced code.
func mdBlocks(src []byte) [][2]int {
	var out [][2]int
	start := 0
	var fence []byte // the open fence's marker, nil outside fenced code
	for i := 0; i < len(src); {
		end := len(src)
		if j := bytes.IndexByte(src[i:], '\n'); j >= 0 {
			end = i + j + 1
		}
		line := src[i:end]
		trimmed := bytes.TrimLeft(line, " ")
		switch {
		case fence == nil && fenceMarker(trimmed) != nil:
			fence = fenceMarker(trimmed)
		case fence != nil && bytes.HasPrefix(trimmed, fence) && len(bytes.TrimSpace(bytes.TrimLeft(trimmed, string(fence[:1])))) == 0:
			fence = nil
		case fence == nil && len(bytes.TrimSpace(line)) == 0:
			out = append(out, [2]int{start, end})
			start = end
		}
		i = end
	}
	if start < len(src) {
		out = append(out, [2]int{start, len(src)})
	}
	return out
}

// fenceMarker is the run of ``` or ~~~ that opens fenced code, or nil.
func fenceMarker(line []byte) []byte {
	if len(line) < 3 || (line[0] != '`' && line[0] != '~') {
		return nil
	}
	n := 0
	for n < len(line) && line[n] == line[0] {
		n++
	}
	if n < 3 {
		return nil
	}
	return line[:n]
}

var tableDelimiter = regexp.MustCompile(`^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$`)

// cutBlock cuts one long block at line ends (and a line longer than mdPart
// anywhere) into parts of about mdPart bytes.
func cutBlock(block []byte) [][]byte {
	lines := bytes.SplitAfter(block, []byte("\n"))
	var head, tail []byte // repeated at the start and end of parts
	switch {
	case fenceMarker(bytes.TrimLeft(lines[0], " ")) != nil:
		head = lines[0]
		tail = append(append([]byte("\n"), fenceMarker(bytes.TrimLeft(lines[0], " "))...), '\n')
		lines = lines[1:]
	case len(lines) > 2 && bytes.Contains(lines[0], []byte("|")) && tableDelimiter.Match(bytes.TrimRight(lines[1], "\r\n")):
		head = append(append([]byte(nil), lines[0]...), lines[1]...)
		lines = lines[2:]
	}
	if len(head) > mdPart/2 {
		head, tail = nil, nil
	}
	var out [][]byte
	var part []byte
	flush := func() {
		if len(part) > 0 {
			out = append(out, append(append(append([]byte(nil), head...), part...), tail...))
		}
		part = nil
	}
	for _, line := range lines {
		for len(line) > mdPart {
			flush()
			cut := mdPart
			for cut > 0 && line[cut]&0xc0 == 0x80 { // not inside a UTF-8 sequence
				cut--
			}
			part = line[:cut]
			flush()
			line = line[cut:]
		}
		if len(part)+len(line) > mdPart {
			flush()
		}
		part = append(part, line...)
	}
	flush()
	return out
}
