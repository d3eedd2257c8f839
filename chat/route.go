package chat

import "weft/db"

// ChooseRoute chooses the route of a new answer from the thread's state
// (read by db in the transaction that creates the answer): agent mode on →
// agent; knowledge bases attached or the web searched (issue 19), and
// the message has text → rag;
// otherwise chat, with a note when knowledge bases were attached but there
// was no text to search for.
func ChooseRoute(f db.RouteFacts) (route, note string) {
	switch {
	case f.Agent:
		return db.RouteAgent, ""
	case (f.HasKBs || f.Web) && f.HasText:
		return db.RouteRAG, ""
	case f.HasKBs:
		return db.RouteChat, db.RouteNoteNoText
	}
	return db.RouteChat, ""
}
