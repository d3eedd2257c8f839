package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ollama/ollama/api"

	"weft/db"
)

// MemoryExtractPrompt is the system message of a silent extraction request.
const MemoryExtractPrompt = "You keep a memory of lasting facts about the user (preferences, name, setup, projects). " +
	"Read the exchange below and reply with the new lasting facts it states about the user, one per line, " +
	"each starting with \"- \", at most 3; reply NONE when there is none. Never include secrets, passing details " +
	"or facts about anyone else."

// maxExtractedFacts is how many facts one turn may add.
const maxExtractedFacts = 3

// MemoryExtractor is the part of a Store that silent extraction uses.
type MemoryExtractor interface {
	MemoryExtract(ctx context.Context, user int64) (bool, error)
	MemoryTurn(ctx context.Context, user, msg int64) (db.ExtractionTurn, error)
	AddMemory(ctx context.Context, user int64, in db.MemoryInput) (db.Memory, error)
}

// ExtractMemories asks the thread's model for the lasting facts of the
// answer msg and its question, and keeps them as memories of source
// "extracted". It does nothing when the user has extraction off, the
// thread is temporary, or the store cannot keep memories. It returns the
// facts kept.
func (rt *Runtime) ExtractMemories(ctx context.Context, user, msg int64) ([]db.Memory, error) {
	st, ok := rt.store.(MemoryExtractor)
	if !ok {
		return nil, nil
	}
	on, err := st.MemoryExtract(ctx, user)
	if err != nil || !on {
		return nil, err
	}
	turn, err := st.MemoryTurn(ctx, user, msg)
	if errors.Is(err, db.ErrNotFound) || turn.Temporary {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	model := turn.Model
	if model == "" {
		model = rt.models.Default(ctx)
	}
	clip := func(s string) string {
		if utf8.RuneCountInString(s) > 4000 {
			return string([]rune(s)[:4000])
		}
		return s
	}
	req := &api.ChatRequest{
		Model:  model,
		Stream: ptr(false),
		Messages: []api.Message{
			{Role: db.RoleSystem, Content: MemoryExtractPrompt},
			{Role: db.RoleUser, Content: fmt.Sprintf("The user wrote:\n%s\n\nThe assistant answered:\n%s", clip(turn.Question), clip(turn.Answer))},
		},
		Options: map[string]any{"num_ctx": rt.models.NumCtx(ctx, model), "num_predict": 200},
	}
	var out strings.Builder
	if err := rt.llm.Chat(ctx, req, func(resp api.ChatResponse) error {
		out.WriteString(resp.Message.Content)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("extract memories: %w", err)
	}
	var kept []db.Memory
	for _, fact := range parseFacts(out.String()) {
		m, err := st.AddMemory(ctx, user, db.MemoryInput{Fact: fact, Source: db.MemoryExtracted, Thread: turn.Thread})
		if errors.Is(err, db.ErrMemoryFull) || errors.Is(err, db.ErrMemoryTemporary) {
			break
		}
		if err != nil {
			continue // a fact too long or empty is dropped
		}
		kept = append(kept, m)
	}
	return kept, nil
}

// parseFacts reads the model's "- fact" lines (NONE: none).
func parseFacts(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		fact, ok := strings.CutPrefix(line, "- ")
		if !ok {
			fact, ok = strings.CutPrefix(line, "* ")
		}
		if !ok || strings.TrimSpace(fact) == "" || strings.EqualFold(strings.TrimSpace(fact), "none") {
			continue
		}
		out = append(out, fact)
		if len(out) == maxExtractedFacts {
			break
		}
	}
	return out
}
