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
			out = append(out, CutMarkdownBlock(src[b[0]:b[1]], MarkdownCut{Part: mdPart, Fences: true})...)
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
		case fence == nil && FenceMarker(trimmed) != nil:
			fence = FenceMarker(trimmed)
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

// FenceMarker is the run of three or more ` or ~ that starts line (the
// marker of fenced code), or nil. Callers decide where a fence may open.
func FenceMarker(line []byte) []byte {
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

// MarkdownCut says how CutMarkdownBlock cuts: the reader here and the
// renderer in views cut the same way, with their own sizes.
type MarkdownCut struct {
	Part int // the most bytes of a part, besides a repeated header
	// Fences repeats a fenced block's opening fence at the start of every
	// part and closes it at the end (the renderer keeps fenced code whole
	// instead, and never hands it here).
	Fences bool
	// AtSpace cuts a line longer than Part at its last space in the part's
	// second half, when there is one, rather than anywhere.
	AtSpace bool
}

// CutMarkdownBlock cuts one long block of Markdown at line ends (and a line
// longer than c.Part at a space or anywhere outside a UTF-8 sequence) into
// parts of at most c.Part bytes, each ending with a line end. A table's
// header rows (and with c.Fences a code block's fences) are repeated in
// every part when they take at most half a part.
func CutMarkdownBlock(block []byte, c MarkdownCut) [][]byte {
	lines := bytes.SplitAfter(block, []byte("\n"))
	var head, tail []byte // repeated at the start and end of parts
	switch {
	case c.Fences && FenceMarker(bytes.TrimLeft(lines[0], " ")) != nil && len(lines[0]) <= c.Part/2:
		head = lines[0]
		tail = append(append([]byte("\n"), FenceMarker(bytes.TrimLeft(lines[0], " "))...), '\n')
		lines = lines[1:]
	case len(lines) > 2 && bytes.Contains(lines[0], []byte("|")) && len(lines[0])+len(lines[1]) <= c.Part/2 &&
		tableDelimiter.Match(bytes.TrimRight(lines[1], "\r\n")):
		head = append(append([]byte(nil), lines[0]...), lines[1]...)
		lines = lines[2:]
	}
	var out [][]byte
	var part []byte
	flush := func() {
		if len(part) > 0 {
			p := make([]byte, 0, len(head)+len(part)+len(tail)+1)
			p = append(append(append(p, head...), part...), tail...)
			if p[len(p)-1] != '\n' {
				p = append(p, '\n')
			}
			out = append(out, p)
		}
		part = nil
	}
	for _, line := range lines {
		for len(line) > c.Part {
			flush()
			cut := c.Part
			if sp := bytes.LastIndexByte(line[c.Part/2:c.Part], ' '); c.AtSpace && sp >= 0 {
				cut = c.Part/2 + sp + 1
			}
			for cut > 0 && line[cut]&0xc0 == 0x80 { // not inside a UTF-8 sequence
				cut--
			}
			part = line[:cut]
			flush()
			line = line[cut:]
		}
		if len(part)+len(line) > c.Part {
			flush()
		}
		part = append(part, line...)
	}
	flush()
	return out
}
