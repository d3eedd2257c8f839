package views

import (
	"regexp"

	"bytes"
	"github.com/microcosm-cc/bluemonday"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Math in answers: $…$ and \(…\) inline, $$…$$ and \[…\] displayed, found
// by goldmark (so never inside code spans or code blocks) and converted by
// texToMathML (mathml.go).
//
//   - A block: a line starting with $$ or \[ (up to three spaces in),
//     either holding the whole expression ("$$ x^2 $$") or opening one
//     that runs until a line ending with $$ or \]. It may interrupt a
//     paragraph, as models write "The formula is:\n$$". An unclosed block
//     is shown as its text.
//   - Inline, pandoc's rules for $, so that prices stay text: the opening
//     $ is not followed by white space, the closing $ is not preceded by
//     white space nor followed by a digit ("$5 and $10" is text), and the
//     expression stays on one line. \(…\) stays on one line too; $$…$$ and
//     \[…\] may span the lines of their paragraph. \[…\] inside a line must
//     hold something only math has (a backslash, ^, _, =, +, - or a
//     brace), so an escaped "\[1\]" stays the text "[1]".
//
// Finding the closer is linear in the paragraph: the first closer at or
// after a position does not depend on the opener, so each search is
// remembered (mathMemo) and an opener inside an already searched stretch
// reuses the answer instead of scanning again ("$a $b $c …" would
// otherwise scan to the end of the line for every $).

// maxInlineMath caps an expression found inline; longer ones stay text.
const maxInlineMath = 4 << 10

var (
	kindMathInline = ast.NewNodeKind("MathInline")
	kindMathBlock  = ast.NewNodeKind("MathBlock")
)

// mathInline is an expression inside a paragraph.
type mathInline struct {
	ast.BaseInline
	tex     []byte
	display bool
	source  []byte // with its delimiters, shown when it cannot be converted
}

func (n *mathInline) Kind() ast.NodeKind { return kindMathInline }

func (n *mathInline) Dump(source []byte, level int) {
	ast.DumpHelper(n, source, level, map[string]string{"TeX": string(n.tex)}, nil)
}

// mathBlock is a displayed expression on lines of its own; its lines hold
// the TeX.
type mathBlock struct {
	ast.BaseBlock
	closer []byte
	closed bool
}

func (n *mathBlock) Kind() ast.NodeKind { return kindMathBlock }
func (n *mathBlock) IsRaw() bool        { return true }

func (n *mathBlock) Dump(source []byte, level int) {
	ast.DumpHelper(n, source, level, nil, nil)
}

// mathExtension adds the parsers and the renderer to a goldmark instance.
type mathExtension struct{}

func (mathExtension) Extend(m goldmark.Markdown) {
	m.Parser().AddOptions(
		parser.WithBlockParsers(util.Prioritized(mathBlockParser{}, 750)),
		parser.WithInlineParsers(util.Prioritized(mathInlineParser{}, 600)),
	)
	m.Renderer().AddOptions(renderer.WithNodeRenderers(util.Prioritized(mathRenderer{}, 100)))
}

// mathOpener returns the closer and whether the expression is displayed,
// for the opener at the start of b (nil when there is none).
func mathOpener(b []byte) (closer []byte, display bool) {
	switch {
	case bytes.HasPrefix(b, []byte("$$")):
		return []byte("$$"), true
	case bytes.HasPrefix(b, []byte(`\[`)):
		return []byte(`\]`), true
	case bytes.HasPrefix(b, []byte(`\(`)):
		return []byte(`\)`), false
	case len(b) > 0 && b[0] == '$':
		return []byte("$"), false
	}
	return nil, false
}

type mathBlockParser struct{}

func (mathBlockParser) Trigger() []byte { return []byte{'$', '\\'} }

func (mathBlockParser) Open(_ ast.Node, reader text.Reader, pc parser.Context) (ast.Node, parser.State) {
	line, seg := reader.PeekLine()
	pos := pc.BlockOffset()
	if pos < 0 {
		return nil, parser.NoChildren
	}
	closer, display := mathOpener(line[pos:])
	if !display {
		return nil, parser.NoChildren
	}
	rest := util.TrimRightSpace(line[pos+2:])
	node := &mathBlock{closer: closer}
	switch {
	case len(util.TrimLeftSpace(rest)) == 0:
		// The opener alone: the expression is on the next lines.
	case bytes.HasSuffix(rest, closer) && len(rest) > len(closer) && !bytes.Contains(rest[:len(rest)-len(closer)], closer):
		// "$$ x $$" on one line.
		start := seg.Start - seg.Padding + pos + 2
		node.Lines().Append(text.NewSegment(start, start+len(rest)-len(closer)))
		node.closed = true
	default:
		// Something after the opener and no closer at the end: inline
		// math in a paragraph, or not math at all.
		return nil, parser.NoChildren
	}
	reader.AdvanceToEOL()
	return node, parser.NoChildren
}

func (mathBlockParser) Continue(node ast.Node, reader text.Reader, _ parser.Context) parser.State {
	n := node.(*mathBlock)
	if n.closed {
		return parser.Close
	}
	line, seg := reader.PeekLine()
	if line == nil {
		return parser.Close
	}
	trimmed := util.TrimRightSpace(line)
	if bytes.HasSuffix(trimmed, n.closer) {
		if len(trimmed) > len(n.closer) {
			n.Lines().Append(text.NewSegment(seg.Start, seg.Start-seg.Padding+len(trimmed)-len(n.closer)))
		}
		n.closed = true
		reader.AdvanceToEOL()
		return parser.Close
	}
	n.Lines().Append(seg)
	reader.AdvanceToEOL()
	return parser.Continue | parser.NoChildren
}

func (mathBlockParser) Close(ast.Node, text.Reader, parser.Context) {}
func (mathBlockParser) CanInterruptParagraph() bool                 { return true }
func (mathBlockParser) CanAcceptIndentedLine() bool                 { return false }

// mathMemo remembers, per closer, the last search: the first closer at or
// after from is at closer (-1: none up to until).
type mathMemo struct {
	from, until, closer int
}

var mathMemoKey = parser.NewContextKey()

func memos(pc parser.Context) map[string]*mathMemo {
	if m, ok := pc.Get(mathMemoKey).(map[string]*mathMemo); ok {
		return m
	}
	m := map[string]*mathMemo{}
	pc.Set(mathMemoKey, m)
	return m
}

type mathInlineParser struct{}

func (mathInlineParser) Trigger() []byte { return []byte{'$', '\\'} }

func (mathInlineParser) Parse(_ ast.Node, block text.Reader, pc parser.Context) ast.Node {
	line, seg := block.PeekLine()
	closer, display := mathOpener(line)
	if closer == nil {
		return nil
	}
	open := len(closer)
	if len(closer) == 1 && (len(line) < 2 || util.IsSpace(line[1])) {
		return nil // "$ 5": not an opener
	}
	start := seg.Start + open // absolute offset of the expression
	source := block.Source()
	var end int // absolute offset of the closer
	if display {
		end = findDisplayCloser(block, pc, closer, start)
	} else {
		end = findLineCloser(line, seg.Start, pc, closer, start)
	}
	if end < 0 || end-start > maxInlineMath {
		return nil
	}
	tex := source[start:end]
	if len(bytes.TrimSpace(tex)) == 0 {
		return nil
	}
	if closer[0] == '\\' && display && !bytes.ContainsAny(tex, `\^_=+-{`) {
		return nil // "\[1\]": an escaped bracket, not math
	}
	node := &mathInline{display: display, source: source[seg.Start : end+len(closer)]}
	// The TeX of a display expression may span lines: take it from the
	// lines' segments so that a container's prefixes ("> ") are left out.
	if display && bytes.IndexByte(tex, '\n') >= 0 {
		node.tex = displayTeX(block, start, end)
	} else {
		node.tex = tex
	}
	advanceTo(block, end+len(closer))
	return node
}

// findLineCloser is the offset of the first closer after start on this
// line, or -1. line starts at lineStart.
func findLineCloser(line []byte, lineStart int, pc parser.Context, closer []byte, start int) int {
	key := string(closer)
	m := memos(pc)[key]
	if m != nil && start >= m.from && (m.closer < 0 && start <= m.until || start <= m.closer) {
		return m.closer
	}
	lineEnd := lineStart + len(line)
	found := -1
	for i := start - lineStart; i < len(line); i++ {
		c := line[i]
		if c == '\n' {
			lineEnd = lineStart + i
			break
		}
		if c == '\\' {
			if key == `\)` && i+1 < len(line) && line[i+1] == ')' {
				found = lineStart + i
				break
			}
			i++ // an escaped character
			continue
		}
		if key == "$" && c == '$' && !util.IsSpace(line[i-1]) && (i+1 >= len(line) || !isDigit(line[i+1])) {
			found = lineStart + i
			break
		}
	}
	memos(pc)[key] = &mathMemo{from: start, until: lineEnd, closer: found}
	return found
}

// findDisplayCloser is the offset of the first closer after start in the
// rest of the paragraph, or -1. The reader's position is kept.
func findDisplayCloser(block text.Reader, pc parser.Context, closer []byte, start int) int {
	key := string(closer)
	m := memos(pc)[key]
	if m != nil && start >= m.from && (m.closer < 0 && start <= m.until || start <= m.closer) {
		return m.closer
	}
	l, pos := block.Position()
	defer block.SetPosition(l, pos)
	found, until := -1, start
	for first := true; ; first = false {
		line, seg := block.PeekLine()
		if line == nil {
			break
		}
		from := 0
		if first {
			from = start - seg.Start
		}
		until = seg.Start + len(line)
		for i := from; i+1 < len(line); i++ {
			if line[i] == '\\' && closer[0] == '$' {
				i++
				continue
			}
			if line[i] == closer[0] && line[i+1] == closer[1] {
				found = seg.Start + i
				break
			}
			if line[i] == '\\' {
				i++
			}
		}
		if found >= 0 {
			break
		}
		block.AdvanceLine()
	}
	memos(pc)[key] = &mathMemo{from: start, until: until, closer: found}
	return found
}

// displayTeX joins the parts of the lines between start and end.
func displayTeX(block text.Reader, start, end int) []byte {
	l, pos := block.Position()
	defer block.SetPosition(l, pos)
	src := block.Source()
	var out []byte
	for {
		line, seg := block.PeekLine()
		if line == nil || seg.Start >= end {
			break
		}
		from, to := max(seg.Start, start), min(seg.Stop, end)
		if from < to {
			out = append(out, src[from:to]...)
		}
		block.AdvanceLine()
	}
	return out
}

// advanceTo moves the reader to the absolute offset to (in this or a later
// line).
func advanceTo(block text.Reader, to int) {
	for {
		line, seg := block.PeekLine()
		if line == nil {
			return
		}
		if to <= seg.Start+len(line) {
			block.Advance(to - seg.Start)
			return
		}
		block.AdvanceLine()
	}
}

// mathRenderer writes math nodes as MathML, or as their source when they
// cannot be converted.
type mathRenderer struct{}

func (mathRenderer) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(kindMathInline, renderMathInline)
	reg.Register(kindMathBlock, renderMathBlock)
}

func renderMathInline(w util.BufWriter, _ []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	n := node.(*mathInline)
	out, ok := texToMathML(string(n.tex), n.display)
	switch {
	case !ok:
		_, _ = w.WriteString(`<code class="math-tex">`)
		_, _ = w.Write(util.EscapeHTML(n.source))
		_, _ = w.WriteString(`</code>`)
	case n.display:
		_, _ = w.WriteString(`<span class="math-display">` + out + `</span>`)
	default:
		_, _ = w.WriteString(out)
	}
	return ast.WalkSkipChildren, nil
}

func renderMathBlock(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	n := node.(*mathBlock)
	var tex []byte
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		tex = append(tex, seg.Value(source)...)
	}
	if !n.closed {
		// An opener nobody closed: the text as it was written.
		_, _ = w.WriteString(`<p>`)
		opener := map[string]string{"$$": "$$", `\]`: `\[`}[string(n.closer)]
		_, _ = w.Write(util.EscapeHTML([]byte(opener + "\n")))
		_, _ = w.Write(util.EscapeHTML(tex))
		_, _ = w.WriteString("</p>\n")
		return ast.WalkSkipChildren, nil
	}
	if out, ok := texToMathML(string(tex), true); ok {
		_, _ = w.WriteString(`<div class="math-display">` + out + "</div>\n")
	} else {
		_, _ = w.WriteString(`<pre class="math-tex"><code>`)
		_, _ = w.Write(util.EscapeHTML(tex))
		_, _ = w.WriteString("</code></pre>\n")
	}
	return ast.WalkSkipChildren, nil
}

// allowMathML admits exactly what texToMathML writes: MathML Core's
// presentation elements (no <annotation-xml>, <semantics>, <maction> or
// anything that could hold HTML) and their few attributes, each with the
// values the converter uses.
func allowMathML(p *bluemonday.Policy) {
	// AllowNoAttrs: bluemonday drops an element it does not know as
	// attribute-free HTML when none of its attributes survive.
	p.AllowNoAttrs().OnElements("math", "mrow", "mi", "mn", "mo", "mtext", "mspace", "msub", "msup", "msubsup",
		"munder", "mover", "munderover", "mfrac", "msqrt", "mroot", "mtable", "mtr", "mtd", "mstyle",
		"mphantom", "merror")
	boolean := regexp.MustCompile(`^(true|false)$`)
	em := regexp.MustCompile(`^-?[0-9]{1,2}(\.[0-9]{1,4})?em$`)
	p.AllowAttrs("display").Matching(regexp.MustCompile(`^block$`)).OnElements("math")
	p.AllowAttrs("mathvariant").Matching(regexp.MustCompile(`^normal$`)).OnElements("mi")
	p.AllowAttrs("stretchy", "fence", "movablelimits").Matching(boolean).OnElements("mo")
	p.AllowAttrs("form").Matching(regexp.MustCompile(`^(prefix|postfix)$`)).OnElements("mo")
	p.AllowAttrs("minsize", "maxsize").Matching(em).OnElements("mo")
	p.AllowAttrs("width").Matching(em).OnElements("mspace")
	p.AllowAttrs("linethickness").Matching(regexp.MustCompile(`^0$`)).OnElements("mfrac")
	p.AllowAttrs("accent").Matching(regexp.MustCompile(`^true$`)).OnElements("mover")
	p.AllowAttrs("accentunder").Matching(regexp.MustCompile(`^true$`)).OnElements("munder")
	p.AllowAttrs("displaystyle").Matching(boolean).OnElements("mstyle", "mtable")
	p.AllowAttrs("scriptlevel").Matching(regexp.MustCompile(`^[0-2]$`)).OnElements("mstyle")
	p.AllowAttrs("class").Matching(regexp.MustCompile(`^math-[lr]$`)).OnElements("mtd")
}
