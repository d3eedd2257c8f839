package db

import (
	"encoding/json"
)

// Message roles (messages.role).
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleSystem    = "system" // compaction nodes
)

// Thread title states (threads.title_state): provisional until the first
// answer's title is generated, generated once it is, user once the user
// named the thread (a generated title never replaces it).
const (
	TitleProvisional = "provisional"
	TitleGenerated   = "generated"
	TitleUser        = "user"
)

// Message kinds (metadata.kind) of messages that are not plain turns.
const (
	KindCompaction   = "compaction"
	KindImageRequest = "image_request"
	KindImageAnswer  = "image_answer"
)

// MessageMeta is a message's metadata (messages.metadata), decoded once when
// the row is read. Raw keeps the stored JSON as it was read, keys unknown to
// Weft included, for exports and copies; the typed fields are what Weft
// reads and writes. A writer builds a MessageMeta; only the keys it sets are
// stored (Raw is never written back from a typed value).
type MessageMeta struct {
	Route     string `json:"route,omitempty"`      // the route that answered (RouteChat…, or "image")
	Model     string `json:"model,omitempty"`      // the model that answered
	RouteNote string `json:"route_note,omitempty"` // why the route is not the expected one (RouteNoteNoText)
	Kind      string `json:"kind,omitempty"`       // KindCompaction, KindImageRequest…; "": a turn
	Thinking  string `json:"thinking,omitempty"`   // the model's reasoning, shown folded
	Usage     Usage  `json:"usage,omitzero"`       // set when the answer finished
	// Sources are a rag answer's sources, marked as cited or not.
	Sources []Source `json:"sources,omitempty"`
	// NothingFound marks a rag answer written without the model: no source
	// was relevant.
	NothingFound bool `json:"nothing_found,omitempty"`
	// Compaction is set on compaction nodes (its keys sit at the top level
	// of the metadata).
	*Compaction
	// Evidence is set on agent answers (its keys sit at the top level).
	*Evidence

	// Raw is the metadata as stored (nil for a value built in Go).
	Raw json.RawMessage `json:"-"`
}

// Usage is what a finished answer cost (also stored on runs.usage).
type Usage struct {
	PromptTokens          int     `json:"prompt_tokens,omitempty"`
	OutputTokens          int     `json:"output_tokens,omitempty"`
	DurationMS            int64   `json:"duration_ms,omitempty"`
	TokensPerSecond       float64 `json:"tokens_per_second,omitempty"`
	DoneReason            string  `json:"done_reason,omitempty"`
	NumCtx                int     `json:"num_ctx,omitempty"`
	ContextFill           float64 `json:"context_fill,omitempty"` // (prompt + output) / num_ctx
	EstimatedPromptTokens int     `json:"estimated_prompt_tokens,omitempty"`
	CompactionID          int64   `json:"compaction_id,omitempty"` // the summary sent with the prompt
	CompactionFailed      bool    `json:"compaction_failed,omitempty"`
	Truncated             bool    `json:"truncated,omitempty"` // the model server cut the prompt
	WallMS                int64   `json:"wall_ms"`
	// Counted stores PromptTokens and OutputTokens even when zero: the
	// model answered (a thread's usage counts the runs that have
	// output_tokens).
	Counted bool `json:"-"`
}

// MarshalJSON writes the token counts of a counted usage even when they are
// zero.
func (u Usage) MarshalJSON() ([]byte, error) {
	type plain Usage
	if !u.Counted {
		return json.Marshal(plain(u))
	}
	return json.Marshal(struct {
		plain
		PromptTokens int `json:"prompt_tokens"`
		OutputTokens int `json:"output_tokens"`
	}{plain(u), u.PromptTokens, u.OutputTokens})
}

// Compaction is what a compaction node records about its summary.
type Compaction struct {
	Covers         int    `json:"covers"`  // messages summarized, earlier summaries included
	Through        int64  `json:"through"` // the last message covered
	Auto           bool   `json:"auto"`    // written before an answer, not on request
	TokensBefore   int    `json:"tokens_before"`
	SummaryPrompt  int    `json:"summary_prompt"` // tokens the summary requests read
	SummaryOutput  int    `json:"summary_output"`
	SummarizedAt   string `json:"summarized_at"` // RFC 3339, UTC
	ReplacedTokens int    `json:"replaced_tokens"`
}

// Evidence is what an agent answer records: its rounds, the files it
// changed and what it read.
type Evidence struct {
	Rounds  int          `json:"rounds"`
	Changes []FileChange `json:"changes,omitempty"`
	Sources []StepSource `json:"agent_sources,omitempty"`
}

// UnmarshalJSON decodes what it can and keeps the stored bytes. A value of
// an unexpected type (imported metadata is any object) leaves its field
// zero instead of failing the read of the message.
func (m *MessageMeta) UnmarshalJSON(b []byte) error {
	if string(b) == "{}" { // most user messages, and every turn of TurnsTo
		*m = MessageMeta{Raw: json.RawMessage("{}")}
		return nil
	}
	type plain MessageMeta
	var p plain
	_ = json.Unmarshal(b, &p)
	*m = MessageMeta(p)
	m.Raw = append(json.RawMessage(nil), b...)
	return nil
}
