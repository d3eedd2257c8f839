package views

import (
	"bytes"
	"context"
	"strings"

	"github.com/a-h/templ"

	"weft/db"
)

// RendererVersion names the output of MessageBodyHTML. A final answer's
// rendering is stored with it (db.StoreRenderedBody) and used only while it
// matches: bump it whenever the markdown renderer, the sanitizer policy, the
// citation links or the placeholders change what a message renders to.
// 2: TeX math as MathML (issue 21).
const RendererVersion = 2

// MessageBodyHTML is the sanitized HTML of an answer's body: its markdown
// with the [n] markers of the sources it cites linked. It is what
// finalMessage shows, so it can be stored once an answer is final and
// shown again as it is.
func MessageBodyHTML(m db.Message) string {
	var b bytes.Buffer
	// Rendering to a buffer cannot fail.
	_ = MarkdownWithCitations(m.Content, m.ID, metaOf(m).Sources).Render(context.Background(), &b)
	return b.String()
}

// HasCode reports whether markdown may hold a fenced code block, which
// chroma highlights.
func HasCode(src string) bool {
	return strings.Contains(src, "```") || strings.Contains(src, "~~~")
}

// HasStoredBody reports whether a message's body is worth storing: an
// answer (other roles are shown as escaped text) that is final.
func HasStoredBody(m db.Message) bool {
	return m.Role == db.RoleAssistant && m.Status != db.MsgStreaming
}

// answerBody is the stored rendering when the view has one, else a new one.
func answerBody(v MessageView) templ.Component {
	if v.Body != "" {
		return templ.Raw(v.Body)
	}
	return MarkdownWithCitations(v.Message.Content, v.Message.ID, metaOf(v.Message).Sources)
}
