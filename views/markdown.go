package views

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/a-h/templ"
	chromahtml "github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	highlighting "github.com/yuin/goldmark-highlighting/v2"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"

	"weft/db"
	"weft/extract"
)

// Model answers are untrusted. They are rendered in three stages:
//
//  1. goldmark (GFM, no raw HTML: html.WithUnsafe is deliberately absent, so
//     HTML in the source becomes an "<!-- raw HTML omitted -->" comment) with
//     fenced code highlighted on the server by chroma using CSS classes only
//     (the CSP forbids style attributes; see static/chroma.css) and TeX math
//     converted to MathML (markdown_math.go, mathml.go);
//  2. one bluemonday allowlist that only admits what stage 1 emits, as a
//     second line of defence;
//  3. the copy buttons and task-list checkboxes are put in after sanitizing:
//     stage 1 writes placeholder spans, so the policy admits no <button> or
//     <input> at all (bluemonday cannot require type="button" or disabled,
//     so allowing the elements would also admit bare ones), and then one
//     strings.Replacer pass swaps the placeholders for the controls and
//     writes newlines as character references.
//
// Both the goldmark instance and the policy are built once and are safe for
// concurrent use.

// markdown is the shared goldmark instance.
var markdown = goldmark.New(
	goldmark.WithExtensions(
		// extension.GFM, except that table alignment is an align="…"
		// attribute: the default (style="text-align:…") breaks under the CSP.
		extension.Linkify,
		extension.NewTable(extension.WithTableCellAlignMethod(extension.TableCellAlignAttribute)),
		extension.Strikethrough,
		extension.TaskList,
		mathExtension{},
		highlighting.NewHighlighting(
			highlighting.WithFormatOptions(chromahtml.WithClasses(true)),
			highlighting.WithGuessLanguage(false),
			highlighting.WithWrapperRenderer(codeBlockWrapper),
		),
	),
	goldmark.WithParserOptions(
		parser.WithASTTransformers(util.Prioritized(codeBlockGuard{}, 1000)),
	),
	goldmark.WithRendererOptions(
		// Overrides goldmark's image renderer (priority 1000) and the task
		// list's checkbox renderer (500); the lowest number wins.
		renderer.WithNodeRenderers(util.Prioritized(markdownNodes{}, 100)),
	),
)

// markdownClass is what a class attribute may hold (chroma's token classes,
// the code-block wrapper classes, language-xxx).
var markdownClass = regexp.MustCompile(`^[a-zA-Z0-9 _-]{1,80}$`)

// markdownPolicy is the single sanitizer policy for rendered markdown.
//
// It mirrors the parts of bluemonday.UGCPolicy() that goldmark emits, built
// on NewPolicy() because UGCPolicy() admits <img> (and id, usemap, area, …)
// and bluemonday has no way to take an element back out of a policy.
var markdownPolicy = func() *bluemonday.Policy {
	p := bluemonday.NewPolicy()

	// URLs: parseable, absolute, http/https/mailto only. Relative links are
	// refused too: a model must not be able to link into the app itself
	// (e.g. a GET on /logout), and "//host" would be protocol-relative.
	p.RequireParseableURLs(true)
	p.AllowRelativeURLs(false)
	p.AllowURLSchemes("http", "https", "mailto")
	// Only links with a host (i.e. absolute http(s)) get
	// rel="nofollow noreferrer noopener" and target="_blank".
	p.RequireNoFollowOnFullyQualifiedLinks(true)
	p.RequireNoReferrerOnFullyQualifiedLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)

	// Blocks and inline phrasing goldmark produces.
	p.AllowElements(
		"p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "hr", "br",
		"ul", "li", "em", "strong", "del", "code", "pre", "div", "span",
	)
	p.AllowAttrs("start").Matching(bluemonday.Integer).OnElements("ol")
	p.AllowElements("ol")

	// Links (an <a> left without an href is dropped, its text kept).
	p.AllowAttrs("href").OnElements("a")
	p.AllowAttrs("title").Matching(bluemonday.Paragraph).OnElements("a")

	// GFM tables, alignment as an attribute.
	p.AllowElements("table", "thead", "tbody", "tr")
	p.AllowAttrs("align").Matching(regexp.MustCompile(`^(left|center|right)$`)).OnElements("th", "td")
	p.AllowElements("th", "td")

	// Highlighted code, the code-block wrapper and the placeholders. No
	// <button> or <input>: see markdownFinish.
	p.AllowAttrs("class").Matching(markdownClass).OnElements("code", "pre", "span", "div")

	allowMathML(p)
	return p
}()

// Placeholders written by the renderer and replaced after sanitizing. They
// are spans with a class, which the policy keeps as they are. Model text
// cannot produce them (raw HTML never reaches the policy), and a forged one
// would only become another copy button or disabled checkbox.
const (
	copySlot     = `<span class="weft-copy"></span>`
	taskDoneSlot = `<span class="weft-task-done"></span>`
	taskTodoSlot = `<span class="weft-task-todo"></span>`
)

// markdownFinish turns sanitized HTML into the final output in one pass:
//   - the placeholders become the copy button and disabled checkboxes;
//   - "\n" and "\r" become character references, which HTML decodes back
//     to the same text (also in <pre> and in attribute values) and never to
//     markup. The output is then a single line, so it can be sent as one SSE
//     "data:" line and a model cannot start an "event:" or "data:" line.
var markdownFinish = strings.NewReplacer(
	copySlot, `<button type="button" class="copy" data-copy>Copy</button>`,
	taskDoneSlot, `<input type="checkbox" checked disabled>`,
	taskTodoSlot, `<input type="checkbox" disabled>`,
	"\n", "&#10;",
	"\r", "&#13;",
)

// newlineEscaper is the newline part of markdownFinish, for the fallback.
var newlineEscaper = strings.NewReplacer("\n", "&#10;", "\r", "&#13;")

var markdownBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getMarkdownBuf() *bytes.Buffer {
	b := markdownBufs.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func putMarkdownBuf(b *bytes.Buffer) {
	if b.Cap() <= 1<<20 {
		markdownBufs.Put(b)
	}
}

// RenderMarkdown renders untrusted markdown (a model's answer) to sanitized
// HTML that is safe to insert into a page under Weft's CSP: no script, style,
// iframe, img, forms or form controls (other than disabled task-list
// checkboxes and the type="button" copy buttons of code blocks),
// event-handler, style or htmx attributes, and only http(s)/mailto URLs.
// The result contains no newline characters (they are written as &#10;).
// Its cost is linear in len(src) (see markdown_guard.go); past
// maxMarkdownBytes the text is shown as it is, escaped.
func RenderMarkdown(src string) string {
	if strings.TrimSpace(src) == "" {
		return ""
	}
	renders.Add(1)
	if len(src) > maxMarkdownBytes {
		return plainTextHTML(src)
	}
	raw := getMarkdownBuf()
	defer putMarkdownBuf(raw)
	pc := parser.NewContext()
	pc.Set(highlightBudgetKey, &highlightBudget{left: maxHighlightBytes, blocks: maxHighlightBlocks})
	for _, part := range markdownParts(extract.CapMarkdownNesting([]byte(src))) {
		// Cutting a long line into parts can start a part with markers
		// that were text before (">>>>Y>>>>…"): cap each part again.
		part = extract.CapMarkdownNesting(part)
		if partHook != nil {
			partHook(part)
		}
		if err := markdown.Convert(part, raw, parser.WithContext(pc)); err != nil {
			// goldmark only fails when the writer does; fall back to text.
			return plainTextHTML(src)
		}
		// A part's reference definitions, footnotes and ids stay in it;
		// only the highlighting budget carries over.
		budget := pc.Get(highlightBudgetKey)
		pc = parser.NewContext()
		pc.Set(highlightBudgetKey, budget)
	}
	clean := getMarkdownBuf()
	defer putMarkdownBuf(clean)
	if err := markdownPolicy.SanitizeReaderToWriter(raw, clean); err != nil {
		return plainTextHTML(src)
	}
	// Drop goldmark's final newline; the rest become character references.
	return markdownFinish.Replace(strings.TrimRight(clean.String(), "\n"))
}

// plainTextHTML shows text as it is: escaped, in a block that keeps its
// line breaks (.plain-text is white-space: pre-wrap), newlines written as
// character references like every rendering.
func plainTextHTML(src string) string {
	return `<div class="plain-text">` + newlineEscaper.Replace(templ.EscapeString(src)) + `</div>`
}

// renders counts the calls of RenderMarkdown that rendered something, so a
// test can tell a stored rendering from a new one.
var renders atomic.Int64

// RenderCount is how many texts RenderMarkdown has rendered in this process.
func RenderCount() int64 { return renders.Load() }

// Markdown is RenderMarkdown as a templ component.
func Markdown(src string) templ.Component {
	return templ.Raw(RenderMarkdown(src))
}

var citationRe = regexp.MustCompile(`\[(\d{1,3})\]`)

// MarkdownWithCitations renders an answer and turns its [n] markers into
// links to the sources they cite. Only text between tags is touched (never
// attributes), and the links are built from numbers and ids alone.
func MarkdownWithCitations(src string, msg int64, sources []db.Source) templ.Component {
	html := RenderMarkdown(src)
	if len(sources) == 0 {
		return templ.Raw(html)
	}
	byN := map[string]db.Source{}
	for _, s := range sources {
		byN[strconv.Itoa(s.N)] = s
	}
	var b strings.Builder
	inTag := false
	start := 0
	flush := func(text string) {
		b.WriteString(citationRe.ReplaceAllStringFunc(text, func(m string) string {
			s, ok := byN[m[1:len(m)-1]]
			if !ok {
				return m
			}
			return fmt.Sprintf(`<a class="cite" href="/m/%d/sources/%d" data-testid="citation" data-document-id="%d">[%d]</a>`,
				msg, s.N, s.DocumentID, s.N)
		}))
	}
	for i := 0; i < len(html); i++ {
		switch {
		case !inTag && html[i] == '<':
			flush(html[start:i])
			start, inTag = i, true
		case inTag && html[i] == '>':
			b.WriteString(html[start : i+1])
			start, inTag = i+1, false
		}
	}
	if inTag {
		b.WriteString(html[start:])
	} else {
		flush(html[start:])
	}
	return templ.Raw(b.String())
}
