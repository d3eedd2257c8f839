package extract

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// mdParser parses GitHub-flavoured Markdown; it is safe for concurrent use.
var mdParser = goldmark.New(goldmark.WithExtensions(extension.GFM)).Parser()

// maxMarkdownNesting caps the containers (block quotes, list items) one
// line may open: goldmark takes time quadratic in that number, and 100 KB
// of ">" would keep it busy for half a minute.
const maxMarkdownNesting = 16

// readMarkdown reads Markdown through goldmark's syntax tree: headings make
// the path, tables are table blocks, and paragraphs, lists, code and quotes
// are text blocks.
func readMarkdown(r *reader, data []byte) error {
	src := CapMarkdownNesting(stripFrontMatter([]byte(decodeText(data))))
	m := &mdReader{r: r}
	for _, part := range mdParts(src) {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		m.src = part
		if err := m.block(mdParser.Parse(text.NewReader(part))); err != nil {
			return err
		}
	}
	return nil
}

type mdReader struct {
	r    *reader
	src  []byte
	path headingPath
}

func (m *mdReader) block(n ast.Node) error {
	switch n := n.(type) {
	case *ast.Document, *ast.Blockquote:
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if err := m.block(c); err != nil {
				return err
			}
		}
		return nil
	case *ast.Heading:
		m.path.set(n.Level, m.inline(n))
		return nil
	case *ast.ThematicBreak:
		return nil
	case *east.Table:
		var rows [][]string
		for row := n.FirstChild(); row != nil; row = row.NextSibling() {
			var cells []string
			for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
				cells = append(cells, m.inline(cell))
			}
			rows = append(rows, cells)
		}
		return m.r.emit(Block{Text: tableText(rows), Headings: m.path.path(), Table: true})
	}
	return m.r.emit(Block{Text: m.plain(n, ""), Headings: m.path.path()})
}

// plain renders a block as text; indent prefixes the lines of nested lists.
func (m *mdReader) plain(n ast.Node, indent string) string {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock, *ast.Heading:
		return m.inline(n)
	case *ast.CodeBlock, *ast.FencedCodeBlock:
		return string(n.Lines().Value(m.src))
	case *ast.HTMLBlock:
		return htmlToText(string(n.Lines().Value(m.src)))
	case *east.Table:
		var b strings.Builder
		for row := n.FirstChild(); row != nil; row = row.NextSibling() {
			for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
				if cell != row.FirstChild() {
					b.WriteString(" | ")
				}
				b.WriteString(m.inline(cell))
			}
			b.WriteByte('\n')
		}
		return b.String()
	case *ast.List:
		var b strings.Builder
		num := n.Start
		for item := n.FirstChild(); item != nil; item = item.NextSibling() {
			marker := "- "
			if n.IsOrdered() {
				marker = fmt.Sprintf("%d. ", num)
				num++
			}
			b.WriteString(indent + marker)
			for c := item.FirstChild(); c != nil; c = c.NextSibling() {
				if c != item.FirstChild() {
					b.WriteString("\n")
					if _, nested := c.(*ast.List); !nested {
						b.WriteString(indent + "  ")
					}
				}
				b.WriteString(strings.TrimRight(m.plain(c, indent+"  "), "\n"))
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	var parts []string
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		parts = append(parts, m.plain(c, indent))
	}
	return strings.Join(parts, "\n\n")
}

// inline renders a block's inline content as plain text.
func (m *mdReader) inline(n ast.Node) string {
	var b strings.Builder
	var walk func(ast.Node)
	walk = func(n ast.Node) {
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch c := c.(type) {
			case *ast.Text:
				v := string(c.Value(m.src))
				if !c.IsRaw() {
					v = html.UnescapeString(v)
				}
				b.WriteString(v)
				switch {
				case c.HardLineBreak():
					b.WriteByte('\n')
				case c.SoftLineBreak():
					b.WriteByte(' ')
				}
			case *ast.String:
				b.Write(c.Value)
			case *ast.AutoLink:
				b.Write(c.Label(m.src))
			case *ast.RawHTML:
			case *east.TaskCheckBox:
				if c.IsChecked {
					b.WriteString("[x] ")
				} else {
					b.WriteString("[ ] ")
				}
			default:
				walk(c)
			}
		}
	}
	walk(n)
	return b.String()
}

// htmlToText is the text of an HTML fragment, scripts and styles left out.
func htmlToText(s string) string {
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	skip := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return b.String()
		case html.TextToken:
			if skip == 0 {
				b.Write(z.Text())
			}
		case html.StartTagToken:
			if name, _ := z.TagName(); htmlSkip[atom.Lookup(name)] {
				skip++
			}
		case html.EndTagToken:
			if name, _ := z.TagName(); htmlSkip[atom.Lookup(name)] && skip > 0 {
				skip--
			}
		}
	}
}

// stripFrontMatter drops a leading YAML front matter block ("---" lines),
// which goldmark would read as a rule and a heading.
func stripFrontMatter(src []byte) []byte {
	rest, ok := bytes.CutPrefix(src, []byte("---\n"))
	if !ok {
		rest, ok = bytes.CutPrefix(src, []byte("---\r\n"))
	}
	if !ok {
		return src
	}
	for i := 0; i < len(rest) && i < 64<<10; {
		line := rest[i:]
		if j := bytes.IndexByte(line, '\n'); j >= 0 {
			line = line[:j+1]
		}
		if t := bytes.TrimRight(line, " \r\n"); string(t) == "---" || string(t) == "..." {
			return rest[i+len(line):]
		}
		i += len(line)
	}
	return src
}

// CapMarkdownNesting rewrites the rare line that opens more than maxMarkdownNesting
// containers, keeping the first ones and the line's text.
func CapMarkdownNesting(src []byte) []byte {
	var out []byte // nil while nothing changed
	start := 0
	for start < len(src) {
		end := len(src)
		if j := bytes.IndexByte(src[start:], '\n'); j >= 0 {
			end = start + j + 1
		}
		line := src[start:end]
		if cut, rest := containerPrefix(line); rest > cut {
			if out == nil {
				out = append(make([]byte, 0, len(src)), src[:start]...)
			}
			out = append(append(out, line[:cut]...), line[rest:]...)
		} else if out != nil {
			out = append(out, line...)
		}
		start = end
	}
	if out == nil {
		return src
	}
	return out
}

// containerPrefix scans the block quote and list markers that start a line.
// If there are more than maxMarkdownNesting, cut is the offset after the
// last one to keep and rest the offset after all of them; otherwise both
// are 0.
func containerPrefix(line []byte) (cut, rest int) {
	depth, i := 0, 0
scan:
	for {
		j := i
		for k := 0; k < 3 && j < len(line) && line[j] == ' '; k++ {
			j++
		}
		if j >= len(line) {
			break
		}
		switch c := line[j]; {
		case c == '>':
			j++
		case c == '-' || c == '+' || c == '*':
			j++
			if j >= len(line) || (line[j] != ' ' && line[j] != '\t') {
				break scan
			}
		case c >= '0' && c <= '9':
			d := j
			for j < len(line) && j-d < 9 && line[j] >= '0' && line[j] <= '9' {
				j++
			}
			if j+1 >= len(line) || (line[j] != '.' && line[j] != ')') || (line[j+1] != ' ' && line[j+1] != '\t') {
				break scan
			}
			j++
		default:
			break scan
		}
		if j < len(line) && (line[j] == ' ' || line[j] == '\t') {
			j++
		}
		depth++
		if depth == maxMarkdownNesting {
			cut = j
		}
		i = j
	}
	if depth > maxMarkdownNesting {
		return cut, i
	}
	return 0, 0
}
