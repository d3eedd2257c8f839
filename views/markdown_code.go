package views

import (
	"strings"
	"unicode/utf8"

	highlighting "github.com/yuin/goldmark-highlighting/v2"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Fenced code: chroma highlighting within a per-message budget, the
// block's header with its language and copy button.

// maxHighlightBytes caps the code of one message that is run through
// chroma, in one block and in all. Chroma's lexers use backtracking regexps
// (bounded by a 250 ms per-match timeout) and cost ~10 µs a byte; the code
// past the budget is shown as plain escaped code.
const maxHighlightBytes = 32 << 10

// maxHighlightBlocks caps the code blocks of one message run through chroma.
const maxHighlightBlocks = 24

// maxLangLabel caps the info-string language shown in a code block's header.
const maxLangLabel = 32

// highlightBudget is what chroma may still lex of one message's code: bytes,
// and blocks (each costs chroma ~1 ms of set-up whatever its size).
type highlightBudget struct{ left, blocks int }

var highlightBudgetKey = parser.NewContextKey()

// codeBlockWrapper wraps each fenced code block in a div with a header that
// shows the language and carries the copy button (static/copy.js). Chroma
// writes <pre class="chroma"><code>…</code></pre> itself when it highlighted
// the block; otherwise the wrapper writes the pre/code and goldmark-highlighting
// writes the HTML-escaped lines between.
func codeBlockWrapper(w util.BufWriter, c highlighting.CodeBlockContext, entering bool) {
	lang, _ := c.Language()
	if !entering {
		if !c.Highlighted() {
			_, _ = w.WriteString("</code></pre>")
		}
		_, _ = w.WriteString("</div>\n")
		return
	}
	_, _ = w.WriteString(`<div class="code-block"><div class="code-head">`)
	if label := langLabel(lang); label != "" {
		_, _ = w.WriteString(`<span class="code-lang">`)
		_, _ = w.Write(util.EscapeHTML([]byte(label)))
		_, _ = w.WriteString(`</span>`)
	}
	_, _ = w.WriteString(copySlot + `</div>`)
	if !c.Highlighted() {
		_, _ = w.WriteString(`<pre class="chroma"><code`)
		if cls := langClass(lang); cls != "" {
			_, _ = w.WriteString(` class="language-` + cls + `"`)
		}
		_, _ = w.WriteString(">")
	}
}

// langLabel is the info-string language cut to maxLangLabel runes.
func langLabel(lang []byte) string {
	s := string(lang)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "")
	}
	if utf8.RuneCountInString(s) > maxLangLabel {
		s = string([]rune(s)[:maxLangLabel])
	}
	return s
}

// langClass keeps the characters of lang that may appear in a class name.
func langClass(lang []byte) string {
	var b strings.Builder
	for _, c := range lang {
		if b.Len() >= maxLangLabel {
			break
		}
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		case c == '+':
			b.WriteString("p") // c++ → language-cpp
		case c == '#':
			b.WriteString("sharp") // c# → language-csharp
		}
	}
	return b.String()
}

// codeBlockGuard gives every fenced code block a node attribute. Node
// attributes make goldmark-highlighting ignore "{…}" attributes in the info
// string (linenos, hl_lines, style), which a model could otherwise use to
// change the markup; blocks too large to lex safely get "nohl".
type codeBlockGuard struct{}

func (codeBlockGuard) Transform(doc *ast.Document, _ text.Reader, pc parser.Context) {
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		if n.Type() == ast.TypeInline {
			return ast.WalkSkipChildren, nil
		}
		fcb, ok := n.(*ast.FencedCodeBlock)
		if !ok {
			return ast.WalkContinue, nil
		}
		size := 0
		lines := fcb.Lines()
		for i := 0; i < lines.Len(); i++ {
			seg := lines.At(i)
			size += seg.Stop - seg.Start
		}
		budget, _ := pc.Get(highlightBudgetKey).(*highlightBudget)
		if size > maxHighlightBytes || (budget != nil && (size > budget.left || budget.blocks == 0)) {
			fcb.SetAttributeString("nohl", true)
		} else {
			if budget != nil {
				budget.left -= size
				budget.blocks--
			}
			fcb.SetAttributeString("weft", true)
		}
		return ast.WalkSkipChildren, nil
	})
}
