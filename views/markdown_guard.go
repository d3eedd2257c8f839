package views

import (
	"bytes"

	"github.com/yuin/goldmark/util"

	"weft/extract"
)

// Rendering cost. goldmark takes time quadratic in the size of some
// constructs and cannot be interrupted: a line of "[a](" scans to the end
// of the line for every "(" (40 KB: ~1 s, 160 KB: ~19 s), a run of
// unmatched "[" or emphasis delimiters is walked for every closer, ">"
// nesting is quadratic in its depth, and chroma lexes at ~10 µs a byte.
// The guards below make the cost of a render linear in its input, with a
// small constant, whatever the input:
//
//   - past maxMarkdownBytes the text is not markdown at all: it is shown
//     escaped and pre-wrapped (plainTextHTML);
//   - a line opening more than 16 block quotes or list items keeps the
//     first ones (extract.CapMarkdownNesting);
//   - a longer text is parsed in parts (markdownParts): blocks, separated
//     by blank lines, grouped up to mdGroup bytes; a block longer than
//     mdLongBlock is cut at line ends into parts of at most mdPart bytes,
//     repeating a table's header rows in every part. goldmark's work on a
//     part is bounded by a function of the part's size, the parts are at
//     most mdGroup bytes and together at most 1.5× the input, so the total
//     is linear. A top-level fenced code block is kept whole: its lines are
//     not parsed inline, so goldmark's work on it is linear. So is a
//     displayed math block ($$ or \[ alone on a line): its lines are TeX,
//     converted in linear time;
//   - chroma highlights at most maxHighlightBytes of code in one message;
//     the rest is shown as plain escaped code.
//
// The same idea guards extract's Markdown reader (read_markdown_cut.go);
// the nesting cap is the reader's own (extract.CapMarkdownNesting), the
// parts are sized for rendering (smaller: a page view cannot wait seconds)
// and keep fenced code whole (a code block split in parts would get several
// copy buttons).
const (
	maxMarkdownBytes = 256 << 10
	mdWhole          = 8 << 10 // texts up to this size are parsed in one go
	mdGroup          = 8 << 10
	mdLongBlock      = 2 << 10
	mdPart           = 1 << 10
)

// partHook, when set (by tests), sees every part handed to goldmark.
var partHook func(part []byte)

// markdownParts cuts markdown into parts that goldmark parses in bounded
// time each.
func markdownParts(src []byte) [][]byte {
	if len(src) <= mdWhole {
		return [][]byte{src}
	}
	var out [][]byte
	start := 0 // of the current group
	for _, b := range mdBlocks(src) {
		block := src[b.start:b.end]
		if b.fence || b.end-b.start > mdLongBlock {
			if b.start > start {
				out = append(out, src[start:b.start])
			}
			if b.fence {
				out = append(out, block)
			} else {
				out = append(out, extract.CutMarkdownBlock(block, extract.MarkdownCut{Part: mdPart, AtSpace: true})...)
			}
			start = b.end
			continue
		}
		if b.end-start > mdGroup && b.start > start {
			out = append(out, src[start:b.start])
			start = b.start
		}
	}
	if start < len(src) {
		out = append(out, src[start:])
	}
	return out
}

type mdBlock struct {
	start, end int
	// fence: the block is one top-level fenced code block, from its opening
	// fence (at the start of a line, after a blank line or at the start of
	// the text) through its closing fence (or the end of the text); or a
	// displayed math block, by the same rules (mathBlockOpener).
	fence bool
}

// mdBlocks returns the blocks of src: runs of lines ended by a blank line,
// where a top-level fenced code block is one block whatever it holds.
//
// The fence rules are CommonMark's, as goldmark applies them: an opener of
// three or more backticks (with no backtick in its info string) or tildes,
// here only at column 0 after a blank line, so that it cannot belong to a
// list item or a paragraph; a closer of the same character, at least as
// long, indented by at most three spaces, followed by nothing but spaces.
// If this scanner saw a fence where goldmark does not, a long block of
// inline markdown would reach goldmark whole; hence the strict opener.
func mdBlocks(src []byte) []mdBlock {
	var out []mdBlock
	start := 0
	var fence []byte // the open fence's marker, nil outside fenced code
	for i := 0; i < len(src); {
		end := len(src)
		if j := bytes.IndexByte(src[i:], '\n'); j >= 0 {
			end = i + j + 1
		}
		line := src[i:end]
		switch {
		case fence != nil:
			if isFenceCloser(line, fence) {
				out = append(out, mdBlock{start, end, true})
				start, fence = end, nil
			}
		case i == start && fenceOpener(line) != nil:
			fence = fenceOpener(line)
		case i == start && mathBlockOpener(line) != nil:
			fence = mathBlockOpener(line)
		case len(bytes.TrimSpace(line)) == 0:
			out = append(out, mdBlock{start: start, end: end})
			start = end
		}
		i = end
	}
	if start < len(src) {
		out = append(out, mdBlock{start, len(src), fence != nil})
	}
	return out
}

// fenceOpener is the marker of a fenced code block that line opens at
// column 0, or nil: a backtick fence's info string may hold no backtick
// (CommonMark), which the shared marker does not check.
func fenceOpener(line []byte) []byte {
	m := extract.FenceMarker(line)
	if m == nil || (line[0] == '`' && bytes.IndexByte(line[len(m):], '`') >= 0) {
		return nil
	}
	return m
}

// mathBlockOpener is the closer of a displayed math block ("$$" or `\]`)
// that line opens at column 0 with nothing else on it, or nil. Such a
// block is kept whole like fenced code: goldmark does not parse its lines
// inline and the converter is linear (markdown_math.go, mathml.go). Space
// here is what mathBlockParser trims (goldmark's, with \v and \f): were
// the block to end earlier for goldmark than here, the rest of the part
// would be parsed inline, whole.
func mathBlockOpener(line []byte) []byte {
	switch string(util.TrimRightSpace(line)) {
	case "$$":
		return []byte("$$")
	case `\[`:
		return []byte(`\]`)
	}
	return nil
}

// isFenceCloser reports whether line closes the fence opened by marker
// (for math, a line ending with the closer, as mathBlockParser reads it).
func isFenceCloser(line, marker []byte) bool {
	if marker[0] == '$' || marker[0] == '\\' {
		return bytes.HasSuffix(util.TrimRightSpace(line), marker)
	}
	i := 0
	for i < 3 && i < len(line) && line[i] == ' ' {
		i++
	}
	n := 0
	for i+n < len(line) && line[i+n] == marker[0] {
		n++
	}
	if n < len(marker) {
		return false
	}
	return len(bytes.Trim(line[i+n:], " \t\r\n")) == 0
}
