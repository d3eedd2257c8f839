package views

import (
	"strings"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"
)

// How goldmark's nodes that could carry markup or fetch something (raw
// HTML, images, task checkboxes) are written: as text, links or
// placeholders, never as the model wrote them.

// markdownNodes overrides goldmark's renderers for images, task-list
// checkboxes and raw HTML.
type markdownNodes struct{}

func (markdownNodes) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindImage, renderImageAsLink)
	reg.Register(east.KindTaskCheckBox, renderTaskCheckBox)
	reg.Register(ast.KindRawHTML, renderRawHTMLAsText)
	reg.Register(ast.KindHTMLBlock, renderHTMLBlockAsText)
}

// renderRawHTMLAsText shows inline HTML a model wrote as the text it is
// ("use a <div> here"), instead of dropping it or letting it act.
func renderRawHTMLAsText(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	segs := node.(*ast.RawHTML).Segments
	for i := 0; i < segs.Len(); i++ {
		seg := segs.At(i)
		_, _ = w.Write(util.EscapeHTML(seg.Value(source)))
	}
	return ast.WalkSkipChildren, nil
}

// renderHTMLBlockAsText shows a block of HTML as code, escaped.
func renderHTMLBlockAsText(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	n := node.(*ast.HTMLBlock)
	_, _ = w.WriteString(`<pre class="raw-html"><code>`)
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		_, _ = w.Write(util.EscapeHTML(seg.Value(source)))
	}
	if n.HasClosure() {
		_, _ = w.Write(util.EscapeHTML(n.ClosureLine.Value(source)))
	}
	_, _ = w.WriteString("</code></pre>\n")
	return ast.WalkSkipChildren, nil
}

// renderTaskCheckBox writes a placeholder for the disabled checkbox of a
// "- [x]" list item (markdownFinish puts the checkbox in).
func renderTaskCheckBox(w util.BufWriter, _ []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	if node.(*east.TaskCheckBox).IsChecked {
		_, _ = w.WriteString(taskDoneSlot + " ")
	} else {
		_, _ = w.WriteString(taskTodoSlot + " ")
	}
	return ast.WalkContinue, nil
}

// renderImageAsLink renders ![alt](url) as a link to url with alt as its
// text, so that an answer can never make the browser fetch anything by
// itself. Images with a non-http(s) URL, or inside a link, render as their
// alt text only.
func renderImageAsLink(w util.BufWriter, _ []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	n := node.(*ast.Image)
	link := isHTTPURL(n.Destination) && !insideLink(n)
	if !link {
		return ast.WalkContinue, nil
	}
	if !entering {
		_, _ = w.WriteString("</a>")
		return ast.WalkContinue, nil
	}
	_, _ = w.WriteString(`<a href="`)
	_, _ = w.Write(util.EscapeHTML(util.URLEscape(n.Destination, true)))
	_, _ = w.WriteString(`">`)
	if !n.HasChildren() {
		_, _ = w.Write(util.EscapeHTML(n.Destination))
	}
	return ast.WalkContinue, nil
}

func isHTTPURL(u []byte) bool {
	s := strings.ToLower(string(u[:min(len(u), 8)]))
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

func insideLink(n ast.Node) bool {
	for p := n.Parent(); p != nil; p = p.Parent() {
		if k := p.Kind(); k == ast.KindLink || k == ast.KindAutoLink {
			return true
		}
	}
	return false
}
