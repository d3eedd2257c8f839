package views_test

import (
	"strings"
	"testing"

	"weft/db"
	"weft/views"
)

// A shared answer keeps its citation markers, but not as links into the
// owner's app, where a reader has no access.
func TestASharedAnswerKeepsItsCitationMarkersWithoutLinksIntoTheApp(t *testing.T) {
	m := db.Message{ID: 12, Role: db.RoleAssistant, Status: db.MsgComplete, Content: "Tea is grown in Assam [1] and **Darjeeling** [2].",
		Metadata: db.MessageMeta{Sources: []db.Source{{N: 1, DocumentID: 31, Document: "tea.pdf", Cited: true}, {N: 2, DocumentID: 32, Document: "hills.pdf", Cited: true}}}}
	owner := views.MessageBodyHTML(m)
	if !strings.Contains(owner, `href="/m/12/sources/1"`) {
		t.Fatalf("the owner's rendering has no citation link: %s", owner)
	}
	shared := views.SharedBodyHTML(owner)
	for _, want := range []string{`<span class="cite">[1]</span>`, `<span class="cite">[2]</span>`, "<strong>Darjeeling</strong>"} {
		if !strings.Contains(shared, want) {
			t.Errorf("the shared rendering lacks %s: %s", want, shared)
		}
	}
	if strings.Contains(shared, "href") {
		t.Errorf("the shared rendering still links somewhere: %s", shared)
	}
}
