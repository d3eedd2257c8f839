package rag

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ChunkOptions size the chunks. Size and Overlap are in runes (defaults
// 1500 and 200; a negative Overlap means none, and it is at most half of
// Size). A table of at most TableMax runes (default 3000) stays one chunk.
type ChunkOptions struct{ Size, Overlap, TableMax int }

// Default chunk options.
const (
	DefaultChunkSize     = 1500
	DefaultChunkOverlap  = 200
	DefaultChunkTableMax = 3000
)

func (o ChunkOptions) withDefaults() ChunkOptions {
	if o.Size <= 0 {
		o.Size = DefaultChunkSize
	}
	switch {
	case o.Overlap == 0:
		o.Overlap = DefaultChunkOverlap
	case o.Overlap < 0:
		o.Overlap = 0
	}
	o.Overlap = min(o.Overlap, o.Size/2)
	if o.TableMax <= 0 {
		o.TableMax = DefaultChunkTableMax
	}
	return o
}

// Chunk is one retrievable piece of a document.
type Chunk struct {
	Position int // 0-based order in the document
	Text     string
	Headings []string
	Page     int
}

// Split cuts blocks into chunks. A chunk never mixes two heading paths or
// two PDF pages. Consecutive text blocks of one section are merged up to
// Size runes; longer text is cut at paragraph, then line, sentence and word
// boundaries (and, for text without spaces such as Chinese or Japanese,
// anywhere), and each further chunk of the same run of text starts with
// about Overlap runes of the previous one, so Size includes the overlap. A
// table of at most TableMax runes is a chunk of its own; a bigger one is
// split by rows, each part starting with the header row. Blank text makes
// no chunk.
func Split(blocks []Block, opt ChunkOptions) []Chunk {
	s := &splitter{opt: opt.withDefaults()}
	for i := 0; i < len(blocks); {
		b := blocks[i]
		if b.Table {
			s.table(b)
			i++
			continue
		}
		var parts []string
		for ; i < len(blocks) && !blocks[i].Table && sameSection(blocks[i], b); i++ {
			if t := strings.TrimSpace(blocks[i].Text); t != "" {
				parts = append(parts, t)
			}
		}
		s.text(strings.Join(parts, "\n\n"), b)
	}
	return s.chunks
}

func sameSection(a, b Block) bool {
	return a.Page == b.Page && slices.Equal(a.Headings, b.Headings)
}

type splitter struct {
	opt    ChunkOptions
	chunks []Chunk
}

func (s *splitter) emit(text string, b Block) {
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	s.chunks = append(s.chunks, Chunk{
		Position: len(s.chunks),
		Text:     text,
		Headings: slices.Clone(b.Headings),
		Page:     b.Page,
	})
}

// text packs a run of one section's text into chunks with overlap.
func (s *splitter) text(text string, b Block) {
	size, overlap := s.opt.Size, s.opt.Overlap
	var cur strings.Builder
	n := 0         // runes in cur
	fresh := false // cur holds more than the overlap
	for _, p := range segment(text, size-overlap) {
		pn := utf8.RuneCountInString(p)
		if fresh && n+pn > size {
			s.emit(cur.String(), b)
			tail := overlapTail(cur.String(), overlap)
			cur.Reset()
			cur.WriteString(tail)
			n, fresh = utf8.RuneCountInString(tail), false
		}
		cur.WriteString(p)
		n += pn
		fresh = fresh || strings.TrimSpace(p) != ""
	}
	if fresh {
		s.emit(cur.String(), b)
	}
}

// overlapTail is the end of s to repeat at the start of the next chunk: at
// most n runes, starting at a word boundary when there is one.
func overlapTail(s string, n int) string {
	if n <= 0 {
		return ""
	}
	start := len(s)
	for i := 0; i < n && start > 0; i++ {
		_, size := utf8.DecodeLastRuneInString(s[:start])
		start -= size
	}
	tail := s[start:]
	if start > 0 {
		before, _ := utf8.DecodeLastRuneInString(s[:start])
		first, _ := utf8.DecodeRuneInString(tail)
		if !unicode.IsSpace(before) && !unicode.IsSpace(first) {
			if i := strings.IndexFunc(tail, unicode.IsSpace); i >= 0 {
				tail = tail[i:]
			}
		}
	}
	if strings.TrimSpace(tail) == "" {
		return ""
	}
	return strings.TrimLeftFunc(tail, unicode.IsSpace)
}

// table makes a table block one chunk, or several of at most TableMax runes
// split by rows, each starting with the header row.
func (s *splitter) table(b Block) {
	text := strings.TrimSpace(b.Text)
	limit := s.opt.TableMax
	if utf8.RuneCountInString(text) <= limit {
		s.emit(text, b)
		return
	}
	header, body, _ := strings.Cut(text, "\n")
	hn := utf8.RuneCountInString(header)
	if hn > limit/2 { // no room to repeat the header: cut it as text
		for _, p := range pack(segment(text, limit), limit) {
			s.emit(p, b)
		}
		return
	}
	var cur strings.Builder
	n := 0 // runes of rows in cur
	flush := func() {
		if n > 0 {
			s.emit(header+"\n"+cur.String(), b)
		}
		cur.Reset()
		n = 0
	}
	room := limit - hn - 1
	for row := range strings.SplitSeq(body, "\n") {
		if strings.TrimSpace(row) == "" {
			continue
		}
		rn := utf8.RuneCountInString(row) + 1
		if n > 0 && n+rn > room+1 {
			flush()
		}
		if rn > room+1 { // one row bigger than a chunk: cut it as text
			for _, p := range pack(segment(row, room), room) {
				s.emit(header+"\n"+p, b)
			}
			continue
		}
		cur.WriteString(row)
		cur.WriteByte('\n')
		n += rn
	}
	flush()
}

// pack joins consecutive pieces while they fit in limit runes.
func pack(pieces []string, limit int) []string {
	var out []string
	var cur strings.Builder
	n := 0
	for _, p := range pieces {
		pn := utf8.RuneCountInString(p)
		if n > 0 && n+pn > limit {
			out = append(out, cur.String())
			cur.Reset()
			n = 0
		}
		cur.WriteString(p)
		n += pn
	}
	if n > 0 {
		out = append(out, cur.String())
	}
	return out
}

// segment cuts s into consecutive pieces of at most limit runes whose
// concatenation is s, at the coarsest boundaries that make them fit:
// paragraphs, then lines, sentences, words, and as a last resort anywhere.
func segment(s string, limit int) []string {
	return segmentAt(s, limit, 0)
}

var boundaries = []func(prev, cur rune, ws string) bool{
	// a paragraph: a blank line
	func(_, _ rune, ws string) bool { return strings.Count(ws, "\n") >= 2 },
	// a line
	func(_, _ rune, ws string) bool { return strings.Contains(ws, "\n") },
	// a sentence: after . ! ? … and a space, or after CJK full stops
	func(prev, _ rune, ws string) bool {
		return (ws != "" && strings.ContainsRune(".!?…", prev)) || strings.ContainsRune("。！？；", prev)
	},
	// a word: after a space or CJK punctuation
	func(prev, _ rune, ws string) bool { return ws != "" || strings.ContainsRune("，、：", prev) },
}

func segmentAt(s string, limit, level int) []string {
	if utf8.RuneCountInString(s) <= limit {
		return []string{s}
	}
	if level == len(boundaries) {
		return hardCut(s, limit)
	}
	var out []string
	for _, p := range cutAt(s, boundaries[level]) {
		out = append(out, segmentAt(p, limit, level+1)...)
	}
	return out
}

// cutAt cuts s before every non-space rune where at says so, given the rune
// before the run of whitespace that precedes it and that whitespace. The
// whitespace stays with the piece before.
func cutAt(s string, at func(prev, cur rune, ws string) bool) []string {
	var out []string
	start, wsStart := 0, -1
	var prev rune
	for i, c := range s {
		if unicode.IsSpace(c) {
			if wsStart < 0 {
				wsStart = i
			}
			continue
		}
		ws := ""
		if wsStart >= 0 {
			ws = s[wsStart:i]
		}
		if i > start && prev != 0 && at(prev, c, ws) {
			out = append(out, s[start:i])
			start = i
		}
		prev, wsStart = c, -1
	}
	return append(out, s[start:])
}

// hardCut cuts s every limit runes.
func hardCut(s string, limit int) []string {
	var out []string
	for s != "" {
		i, n := 0, 0
		for i < len(s) && n < limit {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			n++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}
