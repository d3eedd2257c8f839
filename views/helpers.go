package views

import (
	"encoding/json"
	"net/http"
	"strconv"

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

// messageMeta is the part of a message's metadata the views show.
type messageMeta struct {
	Route    string `json:"route"`
	Model    string `json:"model"`
	Thinking string `json:"thinking"`
	Usage    struct {
		PromptTokens    int     `json:"prompt_tokens"`
		OutputTokens    int     `json:"output_tokens"`
		TokensPerSecond float64 `json:"tokens_per_second"`
		DurationMS      int64   `json:"duration_ms"`
		NumCtx          int     `json:"num_ctx"`
		ContextFill     float64 `json:"context_fill"`
		Truncated       bool    `json:"truncated"`
		Estimated       int     `json:"estimated_prompt_tokens"`
		CompactionID    int64   `json:"compaction_id"`
		CompactionFail  bool    `json:"compaction_failed"`
	} `json:"usage"`
	Covers       int         `json:"covers"` // compaction nodes: messages summarized
	Auto         bool        `json:"auto"`
	Sources      []db.Source `json:"sources"`       // rag answers
	NothingFound bool        `json:"nothing_found"` // rag: no relevant source
	RouteNote    string      `json:"route_note"`    // why the route is not the expected one
}

func metaOf(m db.Message) messageMeta {
	var meta messageMeta
	_ = json.Unmarshal(m.Metadata, &meta)
	return meta
}

func retryable(m db.Message) bool {
	return m.Status == "error" || m.Status == "cancelled" || m.Status == "interrupted"
}

func runStatusLabel(s string) string {
	switch s {
	case "queued":
		return "Queued"
	case "running":
		return "Answering…"
	case "waiting":
		return "Waiting for you"
	case "compacting":
		return "Summarizing earlier messages…"
	case "searching":
		return "Searching the knowledge base…"
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
	if role == "user" {
		return "you"
	}
	return "answer"
}

// CompactionOf is the summary written before an answer was generated (0:
// none).
func CompactionOf(m db.Message) int64 { return metaOf(m).Usage.CompactionID }

// SourcesOf returns the sources stored on a rag answer.
func SourcesOf(m db.Message) []db.Source { return metaOf(m).Sources }
