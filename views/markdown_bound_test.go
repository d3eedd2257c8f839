package views

import (
	"fmt"
	"strings"
	"testing"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// pathological are the inputs that cost goldmark (or chroma) more than
// linear time, each as a function of the wanted size in bytes.
var pathological = []struct {
	name string
	gen  func(n int) string
}{
	{"link openers", func(n int) string { return strings.Repeat("[a](", n/4) }},
	{"image openers", func(n int) string { return strings.Repeat("![a](", n/5) }},
	{"brackets", func(n int) string { return strings.Repeat("[", n) }},
	{"nested brackets", func(n int) string { return strings.Repeat("[", n/2) + strings.Repeat("](x)", n/8) }},
	{"stars", func(n int) string { return strings.Repeat("*a", n/2) }},
	{"star run", func(n int) string { return strings.Repeat("*", n) }},
	{"underscores", func(n int) string { return strings.Repeat("a_ ", n/3) }},
	{"mixed emphasis", func(n int) string { return strings.Repeat("*a _b ", n/6) }},
	{"tildes", func(n int) string { return strings.Repeat("~~a", n/3) }},
	{"backticks", func(n int) string { return strings.Repeat("`a", n/2) }},
	{"angle brackets", func(n int) string { return strings.Repeat("<a", n/2) }},
	{"block quotes", func(n int) string { return strings.Repeat(">", n) }},
	{"nested lists", func(n int) string { return strings.Repeat("- ", n/2) }},
	{"indented lists", func(n int) string {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			b.WriteString(strings.Repeat(" ", i%64*2) + "- x\n")
		}
		return b.String()
	}},
	{"table rows", func(n int) string { return "|a|b|\n|-|-|\n" + strings.Repeat("|x|y|\n", n/6) }},
	{"wide table", func(n int) string { return strings.Repeat("|a", n/4) + "\n" + strings.Repeat("|-", n/4) + "\n" }},
	{"reference definitions", func(n int) string {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "[r%d]: http://x/%d\n", i, i)
		}
		return b.String()
	}},
	{"reference uses", func(n int) string { return "[b]: http://x\n\n" + strings.Repeat("[a][b]", n/6) }},
	{"entities", func(n int) string { return strings.Repeat("&amp", n/4) }},
	{"link destination parens", func(n int) string { return "[a](" + strings.Repeat("(", n) }},
	{"code", func(n int) string { return "```go\n" + strings.Repeat("a := \"b\" + c /* d */\n", n/22) + "```\n" }},
	{"code blocks", func(n int) string { return strings.Repeat("```go\nfunc f() { return `x` }\n```\n\n", n/37) }},
	{"code line", func(n int) string { return "```go\n" + strings.Repeat("x", n) + "\n```\n" }},
	{"unclosed fence of links", func(n int) string { return "``` a`b\n" + strings.Repeat("[a](", n/4) }},
	// Math (markdown_math.go): openers without closers, and blocks the
	// converter must walk in linear time.
	{"dollar openers", func(n int) string { return strings.Repeat(" $a", n/3) }},
	{"dollar openers, one far closer", func(n int) string { return strings.Repeat(" $a", n/3) + "b$" }},
	{"display dollars", func(n int) string { return strings.Repeat("$$a ", n/4) }},
	{"bracket openers", func(n int) string { return strings.Repeat(`\[a `, n/4) }},
	{"paren openers", func(n int) string { return strings.Repeat(`\(a `, n/4) }},
	{"bracket openers on lines", func(n int) string { return strings.Repeat("\\[a\n", n/4) }},
	{"math block", func(n int) string { return "$$\n" + strings.Repeat(`\frac{a}{b} + `, n/14) + "\n$$\n" }},
	{"math braces", func(n int) string { return "$$\n" + strings.Repeat("{", n/2) + strings.Repeat("}", n/2) + "\n$$\n" }},
	{"math cells", func(n int) string { return "$$\n" + strings.Repeat(`a & b \\ `, n/9) + "\n$$\n" }},
	{"math scripts", func(n int) string { return strings.Repeat("$x^{y}_{z}$ ", n/12) }},
	{"math blocks", func(n int) string { return strings.Repeat("$$\n\\sqrt{x}\n$$\n\n", n/16) }},
	{"unclosed math block of links", func(n int) string { return "$$\n" + strings.Repeat("[a](", n/4) }},
	// Blocks of expressions of a fixed size, so that the small and the
	// large input are both converted (one expression past maxMathBytes is
	// shown as its source, which proves nothing about the converter).
	{"math blocks of cells", func(n int) string { return mathBlocks(n, strings.Repeat("&", 4000)) }},
	{"math blocks of nested environments", func(n int) string {
		return mathBlocks(n, strings.Repeat(`\begin{matrix}`, 15)+strings.Repeat("a&", 1500)+strings.Repeat(`\end{matrix}`, 15))
	}},
	{"math blocks of nested groups", func(n int) string {
		return mathBlocks(n, strings.Repeat("{", 23)+strings.Repeat("x^{y}_{z}", 400)+strings.Repeat("}", 23))
	}},
	{"math blocks of ties", func(n int) string { return mathBlocks(n, strings.Repeat("~", 4000)) }},
	{"math blocks of a wide array", func(n int) string {
		return mathBlocks(n, `\begin{array}{`+strings.Repeat("c", 2000)+"}"+strings.Repeat(`\mathbb{R}&`, 200)+`\end{array}`)
	}},
	// goldmark trims \v and \f at a line's end too: there the math block
	// ends and the rest of the part is parsed inline.
	{"math block closed before a vertical tab", func(n int) string { return "$$\nx$$\v\n" + strings.Repeat("[a](", n/4) }},
	{"bracket block closed before a form feed", func(n int) string { return "\\[\nx\\]\f\n" + strings.Repeat("[a](", n/4) }},
	{"math block opened before a form feed", func(n int) string { return "$$\f\nx\n$$\n" + strings.Repeat("[a](", n/4) }},
}

// mathBlocks is displayed math blocks of tex, about n bytes in all.
func mathBlocks(n int, tex string) string {
	return strings.Repeat("$$\n"+tex+"\n$$\n\n", max(1, n/(len(tex)+8)))
}

// partCost is a deterministic stand-in for goldmark's work on src: the sum
// of the squares of the sizes of the parts it is handed, i.e. its worst
// case (quadratic in a part) summed over the parts; a fenced code block
// counts its size times mdGroup, as goldmark does not parse code inline
// (chroma's share is bounded by the highlighting budget). Unguarded, it is n².
func partCost(src string) (cost, bytes int) {
	partHook = func(p []byte) {
		if isFencedPart(p) {
			cost += len(p) * mdGroup
		} else {
			cost += len(p) * len(p)
		}
		bytes += len(p)
	}
	defer func() { partHook = nil }()
	RenderMarkdown(src)
	return cost, bytes
}

func TestRenderMarkdownWorkGrowsLinearlyOnPathologicalInput(t *testing.T) {
	const n = 16 << 10
	for _, p := range pathological {
		t.Run(p.name, func(t *testing.T) {
			small, large := p.gen(n), p.gen(4*n)
			c1, b1 := partCost(small)
			c4, b4 := partCost(large)
			// Linear work quadruples; quadratic would grow 16-fold.
			if c4 > 5*c1+mdGroup*mdGroup {
				t.Errorf("part cost grew from %d to %d for 4× the input", c1, c4)
			}
			if b4 > 3*len(large)/2+mdPart || b1 > 3*len(small)/2+mdPart {
				t.Errorf("goldmark was handed %d and %d bytes for inputs of %d and %d", b1, b4, len(small), len(large))
			}
			a1 := testing.AllocsPerRun(1, func() { RenderMarkdown(small) })
			a4 := testing.AllocsPerRun(1, func() { RenderMarkdown(large) })
			if a4 > 6*a1+100 {
				t.Errorf("allocations grew from %.0f to %.0f for 4× the input", a1, a4)
			}
			if out := RenderMarkdown(large); len(out) > outputBound(len(large)) {
				t.Errorf("output of %d bytes for %d bytes of input", len(out), len(large))
			}
		})
	}
}

// isFencedPart reports whether a part is one fenced code block or one
// displayed math block, both by the scanner's rules and by goldmark's (its
// block parsers alone, which take linear time): where they disagree,
// goldmark parses the rest of the part inline, in up to quadratic time.
func isFencedPart(p []byte) bool {
	bs := mdBlocks(p)
	if len(bs) != 1 || !bs[0].fence {
		return false
	}
	doc := blockParser.Parse(text.NewReader(p))
	if doc.ChildCount() != 1 {
		return false
	}
	k := doc.FirstChild().Kind()
	return k == ast.KindFencedCodeBlock || k == kindMathBlock
}

// blockParser is goldmark's block parsing as RenderMarkdown's instance
// does it, without inline parsing.
var blockParser = parser.NewParser(
	parser.WithBlockParsers(append(parser.DefaultBlockParsers(), util.Prioritized(mathBlockParser{}, 750))...),
	parser.WithParagraphTransformers(parser.DefaultParagraphTransformers()...),
)

// outputBound is the most HTML a text of n bytes may render to.
func outputBound(n int) int { return 40*n + 4096 }

func TestRenderMarkdownPartsAreBounded(t *testing.T) {
	for _, p := range pathological {
		src := p.gen(200 << 10)
		partHook = func(part []byte) {
			if len(part) > mdGroup && !isFencedPart(part) {
				t.Errorf("%s: a part of %d bytes that is not a fenced code block", p.name, len(part))
			}
		}
		RenderMarkdown(src)
		partHook = nil
	}
}

func TestRenderMarkdownPastTheLimitIsEscapedText(t *testing.T) {
	src := "# not a heading\n\n<script>alert(1)</script> [a](" + strings.Repeat("x\n", maxMarkdownBytes/2)
	out := RenderMarkdown(src)
	assertInert(t, out)
	if !strings.HasPrefix(out, `<div class="plain-text"># not a heading&#10;&#10;&lt;script&gt;`) || strings.Contains(out, "<h1") {
		t.Errorf("a text past the limit should be shown escaped: %.200s", out)
	}
}

func TestRenderMarkdownLongTextStillRendersMarkdown(t *testing.T) {
	var b strings.Builder
	for b.Len() < 100<<10 {
		b.WriteString("## Part\n\nSome **bold** text and a [link](https://example.com).\n\n")
	}
	b.WriteString("```go\n" + strings.Repeat("x := 1\n", 1000) + "```\n")
	out := RenderMarkdown(b.String())
	assertInert(t, out)
	if strings.Count(out, "<h2>") < 1000 || strings.Count(out, `<a href="https://example.com"`) < 1000 {
		t.Errorf("headings or links lost in a long text: %.300s", out)
	}
	if strings.Count(out, `<div class="code-block">`) != 1 {
		t.Errorf("a long fenced code block should stay one block")
	}
}

func TestRenderMarkdownHighlightsAtMostTheBudgetInAll(t *testing.T) {
	block := "```go\n" + strings.Repeat("var x = 1\n", maxHighlightBytes/10/2) + "```\n\n"
	out := RenderMarkdown(strings.Repeat(block, 4))
	assertInert(t, out)
	if got := strings.Count(out, `<pre class="chroma"><code class="language-go">`); got != 2 {
		t.Errorf("%d of 4 half-budget blocks left plain, want 2", got)
	}
}

func TestRenderMarkdownHighlightsAtMostSoManyBlocks(t *testing.T) {
	out := RenderMarkdown(strings.Repeat("```go\nvar x = 1\n```\n\n", 2*maxHighlightBlocks))
	if got := strings.Count(out, `<pre class="chroma"><code class="language-go">`); got != maxHighlightBlocks {
		t.Errorf("%d of %d small blocks left plain, want %d", got, 2*maxHighlightBlocks, maxHighlightBlocks)
	}
}

func BenchmarkRenderMarkdownPathological(b *testing.B) {
	for _, p := range pathological {
		for _, n := range []int{40 << 10, 160 << 10} {
			src := p.gen(n)
			b.Run(fmt.Sprintf("%s/%dKB", strings.ReplaceAll(p.name, " ", "_"), n>>10), func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				for b.Loop() {
					RenderMarkdown(src)
				}
			})
		}
	}
}

func BenchmarkRenderMarkdownOneMegabyte(b *testing.B) {
	src := strings.Repeat("[a](", 1<<18)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		RenderMarkdown(src)
	}
}
