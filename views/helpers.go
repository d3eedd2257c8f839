package views

import (
	"net/http"
	"strconv"

	"weft/chat"
	"weft/db"
)

func statusTitle(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "Error"
}

func boolValue(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// messageMeta is a message's metadata as the views read it (decoded once,
// by db, when the message was read).
type messageMeta struct {
	db.MessageMeta
	Covers int // compaction nodes: messages summarized
}

func metaOf(m db.Message) messageMeta {
	mm := messageMeta{MessageMeta: m.Metadata}
	if c := m.Metadata.Compaction; c != nil {
		mm.Covers = c.Covers
	}
	return mm
}

func retryable(m db.Message) bool {
	return m.Status == db.MsgError || m.Status == db.MsgCancelled || m.Status == db.MsgInterrupted
}

func runStatusLabel(s string) string {
	switch s {
	case db.RunQueued:
		return "Queued"
	case db.RunRunning:
		return "Answering…"
	case db.RunWaiting:
		return "Waiting for you"
	case chat.StatusCompacting:
		return "Summarizing earlier messages…"
	case chat.StatusSearching:
		return "Searching the knowledge base…"
	case chat.StatusSearchingWeb:
		return "Searching the web and reading the pages found…"
	}
	return s
}

func itoa(n int) string { return strconv.Itoa(n) }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

func seconds(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64) + " s" }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func textID(run int64) string     { return "run-" + id(run) + "-text" }
func thinkingID(run int64) string { return "run-" + id(run) + "-thinking" }

func hitURL(h db.SearchHit) string {
	if h.MessageID == nil {
		return threadURL(h.ThreadID)
	}
	return threadURL(h.ThreadID) + "?at=" + id(*h.MessageID) + "#m" + id(*h.MessageID)
}

func roleName(role string) string {
	if role == db.RoleUser {
		return "you"
	}
	return "answer"
}

// CompactionOf is the summary written before an answer was generated (0:
// none).
func CompactionOf(m db.Message) int64 { return metaOf(m).Usage.CompactionID }

// SourcesOf returns the sources stored on a rag answer.
func SourcesOf(m db.Message) []db.Source { return metaOf(m).Sources }

// filesHint says what the composer accepts as attachments.
func filesHint(c ComposerData) string {
	return "Up to " + strconv.Itoa(c.MaxFiles) + " files of " + fileSize(c.MaxFileBytes) +
		" each: images for vision models; PDF, DOCX, text, Markdown, CSV and HTML are read as text."
}

// routeBadge is the label and the tooltip of an answer's route ("" for a
// message that is not an answer or has no route).
func routeBadge(m db.Message) (label, title string) {
	if m.Role != db.RoleAssistant {
		return "", ""
	}
	switch metaOf(m).Route {
	case db.RouteChat:
		return "chat", "Answered by the model from the conversation"
	case db.RouteRAG:
		return "knowledge", "Answered from your knowledge bases, with sources"
	case db.RouteAgent:
		return "agent", "Answered by the agent, with tools"
	}
	return "", ""
}
