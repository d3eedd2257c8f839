package chat

import (
	"testing"

	"weft/db"
)

func TestChooseRouteSendsAgentThreadsToTheAgentAndQuestionsWithKnowledgeBasesToRAG(t *testing.T) {
	cases := []struct {
		name        string
		facts       db.RouteFacts
		route, note string
	}{
		{"a plain thread chats", db.RouteFacts{HasText: true}, db.RouteChat, ""},
		{"agent mode wins over knowledge bases", db.RouteFacts{Agent: true, HasKBs: true, HasText: true}, db.RouteAgent, ""},
		{"agent mode answers files without text", db.RouteFacts{Agent: true}, db.RouteAgent, ""},
		{"a question in a thread with knowledge bases searches them", db.RouteFacts{HasKBs: true, HasText: true}, db.RouteRAG, ""},
		{"files without text cannot be searched for: chat, with a note", db.RouteFacts{HasKBs: true}, db.RouteChat, db.RouteNoteNoText},
		{"files without text in a plain thread chat", db.RouteFacts{}, db.RouteChat, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			route, note := ChooseRoute(c.facts)
			if route != c.route || note != c.note {
				t.Errorf("ChooseRoute(%+v) = %q, %q; want %q, %q", c.facts, route, note, c.route, c.note)
			}
		})
	}
}
