package media

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"weft/extract"
)

// markdown parses answers as the views render them (GitHub Flavored).
var markdown = goldmark.New(goldmark.WithExtensions(extension.GFM, extension.Footnote))

var (
	bareURL     = regexp.MustCompile(`(?i)\b(?:https?://|www\.)[^\s<>()]+`)
	emptyCells  = regexp.MustCompile(`,(\s*,)+`)
	trailCommas = regexp.MustCompile(`[\s,]+$`)
	spacedPunct = regexp.MustCompile(`\s+([.,!?;:])(\s|$)`)
)

// SpeakableText turns a Markdown answer into plain sentences to read
// aloud: code blocks, HTML, images, URLs and footnote marks go; links keep
// their words; emphasis, heading and list marks go; table rows become
// comma-separated sentences. Every block ends with punctuation, so a
// speaker pauses between them. Blocks are separated by blank lines.
//
// Only the first maxSpeakableBytes of the text are read (cut at a line end):
// goldmark's inline parsing is quadratic on hostile text (160 KB of "[a("
// took 15 s), and no engine reads more than that aloud anyway.
func SpeakableText(md string) string {
	src := extract.CapMarkdownNesting([]byte(cutSpeakable(md)))
	doc := markdown.Parser().Parse(text.NewReader(src))
	var blocks []string
	var cur strings.Builder
	flush := func() {
		s := strings.Join(strings.Fields(bareURL.ReplaceAllString(cur.String(), "")), " ")
		s = spacedPunct.ReplaceAllString(s, "$1$2")
		s = trailCommas.ReplaceAllString(emptyCells.ReplaceAllString(s, ","), "")
		s = strings.TrimLeft(s, ",;: ")
		cur.Reset()
		if !hasWords(s) {
			return
		}
		if r, _ := utf8.DecodeLastRuneInString(s); !strings.ContainsRune(".!?…:;", r) {
			s += "."
		}
		blocks = append(blocks, s)
	}
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		switch n.Kind() {
		case ast.KindFencedCodeBlock, ast.KindCodeBlock, ast.KindHTMLBlock, ast.KindRawHTML,
			ast.KindAutoLink, ast.KindImage, ast.KindThematicBreak,
			east.KindFootnoteLink, east.KindFootnoteBacklink, east.KindTaskCheckBox:
			return ast.WalkSkipChildren, nil
		case ast.KindParagraph, ast.KindTextBlock, ast.KindHeading, east.KindTableRow, east.KindTableHeader:
			if !entering {
				flush()
			}
		case east.KindTableCell:
			if !entering {
				cur.WriteString(", ")
			}
		case ast.KindLink:
			if entering && looksLikeURL(nodeText(n, src)) {
				return ast.WalkSkipChildren, nil
			}
		case ast.KindText:
			if entering {
				t := n.(*ast.Text)
				cur.Write(unescape(t.Segment.Value(src)))
				if t.SoftLineBreak() || t.HardLineBreak() {
					cur.WriteByte(' ')
				}
			}
		case ast.KindString:
			if entering {
				cur.Write(unescape(n.(*ast.String).Value))
			}
		}
		return ast.WalkContinue, nil
	})
	flush()
	return strings.Join(blocks, "\n\n")
}

func unescape(b []byte) []byte {
	return util.ResolveEntityNames(util.ResolveNumericReferences(util.UnescapePunctuations(b)))
}

// nodeText is the raw text under an inline node.
func nodeText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if t, ok := c.(*ast.Text); ok && entering {
			b.Write(t.Segment.Value(src))
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

func looksLikeURL(s string) bool {
	s = strings.TrimSpace(s)
	return bareURL.FindString(s) == s && s != ""
}

func hasWords(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

// maxSpeakableBytes bounds the markdown SpeakableText parses: enough for
// the 20,000 characters espeak-ng is given (DefaultEspeakMaxChars) with
// room for markup, small enough that a pathological text costs well under
// a second.
const maxSpeakableBytes = 32 << 10

// cutSpeakable keeps the first maxSpeakableBytes of md, cut after its last
// line end in the last half, else at a character boundary.
func cutSpeakable(md string) string {
	if len(md) <= maxSpeakableBytes {
		return md
	}
	cut := md[:maxSpeakableBytes]
	if i := strings.LastIndexByte(cut, '\n'); i >= maxSpeakableBytes/2 {
		return cut[:i+1]
	}
	for len(cut) > 0 && !utf8.RuneStart(md[len(cut)]) {
		cut = cut[:len(cut)-1]
	}
	return cut
}
