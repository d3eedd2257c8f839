package chat

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"

	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/internal/usererr"
)

// This file is the one place where model requests are put together, for
// every route (chat, rag, agent): the same system prompt, role, notes,
// summary and budget rules apply to all of them.
//
// Order of a request, never stored as visible messages:
//
//	system: instance system prompt → the user's custom instructions → the
//	        role's prompt → the thread's notes → the user's memories (an
//	        overview; none in a temporary thread) → the summary of older
//	        turns (compaction) → the route's context (retrieved sources,
//	        agent rules)
//	then:   the turns of the path to the message being answered that
//	        follow the last context clear (/clear) on it and that the
//	        summary does not cover.
//
// A room's agent (chat/rooms_run.go) has no custom instructions and no
// memories; its room preamble comes where the instructions would, its own
// prompt and parameters take the role's place, and its turns are the
// room's line with every other speaker named.

// MessageOverhead is the estimate of tokens a chat template adds around
// each message (role markers, separators).
const MessageOverhead = 4

// defaultCharsPerToken is the estimate used until a model is calibrated.
const defaultCharsPerToken = 4.0

// ContextRequest says what to assemble.
type ContextRequest struct {
	User   int64
	Thread int64
	// Leaf is the last message of the path to send: the user message being
	// answered (or, for a manual compaction or the gauge, the active leaf).
	Leaf  int64
	Model string // "" uses the thread's model
	// Partial is an answer being continued: it goes after the path, so the
	// model carries on from its own words.
	Partial *db.Message
	// RouteContext is the route's own context: retrieved sources (rag) or
	// the execution context (agent). "" for chat.
	RouteContext string
	// room is a room run's profile (nil: a thread's request): the agent's
	// prompt and parameters replace the role, the speakers are named, the
	// room's compression settings apply (chat/rooms_run.go).
	room *roomContext
}

// Assembly is a model request ready to send, with its budget.
type Assembly struct {
	Model    string
	Messages []api.Message
	Options  map[string]any
	NumCtx   int // the context window sent as num_ctx
	Window   int // the model's own context length (0: unknown)
	// Budget is the prompt size that fits: NumCtx minus the room kept for
	// the answer.
	Budget        int
	Estimate      int     // estimated prompt tokens of Messages
	CharsPerToken float64 // the calibration used for the estimate
	Calibrated    bool    // CharsPerToken was learned from this model's counts
	Sources       db.ContextSources
	Cleared       *db.Message // the context clear the sent turns follow (nil: from the root)
	Summary       *db.Message // the compaction node whose summary was sent
	Compacted     *db.Message // a compaction node written for this very request
	// CompactionFailed: older turns should have been summarized first, but
	// the summary could not be written.
	CompactionFailed bool
	// RAGSources are the retrieved sources sent in the route context (rag).
	RAGSources []db.Source
	// Direct is an answer given without asking the model (a rag question
	// with nothing relevant in the knowledge base).
	Direct       string
	Turns        []db.Message // the path messages sent after the system prompt
	SystemTokens int          // estimated tokens of the system message
}

// Fill is the estimated share of the context window the prompt takes.
func (a Assembly) Fill() float64 {
	if a.NumCtx <= 0 {
		return 0
	}
	return float64(a.Estimate) / float64(a.NumCtx)
}

// Assemble builds the request for a path. It is the only code that turns
// stored data into model messages and options.
func (rt *Runtime) Assemble(ctx context.Context, req ContextRequest) (Assembly, error) {
	cs, err := rt.store.ContextSources(ctx, req.User, req.Thread)
	if err != nil {
		return Assembly{}, fmt.Errorf("load thread: %w", err)
	}
	// A room's thread is its owner's, its requests are not: the owner's
	// custom instructions and memories stay out of them.
	inRoom := req.room != nil || cs.Thread.IsRoom
	roomPart := ""
	if inRoom {
		cs.Instructions = ""
	}
	if req.room != nil {
		cs.Role = agentRole(req.room.Agent)
		roomPart = roomPreamble(req.room)
	}
	a := Assembly{Sources: cs, Model: req.Model}
	if a.Model == "" {
		a.Model = cs.Thread.Model
	}
	var path []db.Message
	if req.Leaf != 0 {
		if path, err = rt.store.TurnsTo(ctx, req.User, req.Leaf, rt.cfg.MaxPath); err != nil {
			return Assembly{}, fmt.Errorf("load path: %w", err)
		}
	}
	// A context clear on the path starts the segment sent: every turn up
	// to it is skipped, and so is every summary of those turns (only the
	// compaction nodes under the turns after it are looked up).
	if a.Cleared, path, err = rt.applyClear(ctx, req.User, req.Thread, path); err != nil {
		return Assembly{}, fmt.Errorf("load context clears: %w", err)
	}
	a.Turns = path
	if cs.Thread.Compaction && len(path) > 0 {
		ids := make([]int64, len(path))
		for i, m := range path {
			ids[i] = m.ID
		}
		nodes, err := rt.store.Compactions(ctx, req.User, req.Thread, ids)
		if err != nil {
			return Assembly{}, fmt.Errorf("load summaries: %w", err)
		}
		a.Summary, a.Turns = applySummary(path, nodes)
	}
	if req.room != nil {
		// The room's history cap: the newest messages, the one answered
		// among them.
		if n := req.room.Room.HistoryMessages; n > 0 && len(a.Turns) > n {
			a.Turns = a.Turns[len(a.Turns)-n:]
		}
	}
	if req.Partial != nil {
		a.Turns = append(a.Turns[:len(a.Turns):len(a.Turns)], *req.Partial)
	}

	a.Window = rt.models.ContextLength(ctx, a.Model)
	a.NumCtx = contextWindow(a.Window, rt.models.maxCtx, cs.Role, cs.Thread.NumCtx)
	a.Options = roleOptions(cs.Role)
	a.Options["num_ctx"] = a.NumCtx
	a.Budget = a.NumCtx - answerReserve(a.NumCtx, cs.Role)

	a.CharsPerToken, a.Calibrated = rt.charsPerToken(ctx, a.Model)
	a.Messages = make([]api.Message, 0, len(a.Turns)+1)
	memory := ""
	if !inRoom {
		if memory, err = rt.memoryOverview(ctx, req.User, req.Thread); err != nil {
			return Assembly{}, fmt.Errorf("load memories: %w", err)
		}
	}
	if sys := systemPrompt(cs, roomPart, memory, a.Summary, req.RouteContext); sys != "" {
		a.Messages = append(a.Messages, api.Message{Role: db.RoleSystem, Content: sys})
		a.SystemTokens = estimateTokens(a.Messages, a.CharsPerToken)
	}
	sent := a.Turns
	if req.room != nil {
		sent = speakerTurns(a.Turns, req.room.Agent.ID)
	}
	turns, err := rt.withAttachments(ctx, req.User, a.Model, sent)
	if err != nil {
		return Assembly{}, err
	}
	a.Messages = append(a.Messages, turns...)
	a.Estimate = estimateTokens(a.Messages, a.CharsPerToken)
	return a, nil
}

// withAttachments turns the path into model messages with the files of its
// user messages: a document's text (read once, when it was sent) follows
// the message's own text; images go to a vision model as images, and are
// named as left out for any other model.
func (rt *Runtime) withAttachments(ctx context.Context, user int64, model string, turns []db.Message) ([]api.Message, error) {
	var ids []int64
	for _, m := range turns {
		if m.Role == db.RoleUser {
			ids = append(ids, m.ID)
		}
	}
	files, err := rt.store.Attachments(ctx, user, ids)
	if err != nil {
		return nil, fmt.Errorf("load attachments: %w", err)
	}
	vision := false
	if len(files) > 0 {
		vision, _ = rt.models.Supports(ctx, model, "vision")
	}
	out := make([]api.Message, 0, len(turns))
	for _, m := range turns {
		if m.Role == db.RoleAssistant && m.Content == "" {
			continue // an answer that never got text says nothing to the model
		}
		msg := api.Message{Role: m.Role, Content: m.Content}
		var b strings.Builder
		b.WriteString(m.Content)
		for _, f := range files[m.ID] {
			switch {
			case f.Kind == db.AttachDocument:
				fmt.Fprintf(&b, "\n\n[Attached document: %s]\n%s", f.Name, f.Text)
				if f.TextTruncated {
					b.WriteString("\n[The document was cut here: it is longer than what Weft gives the model.]")
				}
				fmt.Fprintf(&b, "\n[End of %s]", f.Name)
			case f.Kind == db.AttachImage && vision && rt.cfg.Blobs != nil:
				data, err := rt.cfg.Blobs.Read(f.SHA256)
				if errors.Is(err, fs.ErrNotExist) {
					// The file is gone: say so rather than fail this turn
					// and every later one of the thread.
					slog.Warn("attached image missing", "attachment", f.ID, "sha", f.SHA256)
					fmt.Fprintf(&b, "\n\n[An image (%s) was attached, but its file is no longer stored.]", f.Name)
					continue
				}
				if err != nil {
					slog.Error("read attached image", "attachment", f.ID, "err", err)
					return nil, usererr.Wrap(err, fmt.Sprintf("The attached image %s could not be read on the server; the server log has the details.", f.Name))
				}
				msg.Images = append(msg.Images, api.ImageData(data))
			case f.Kind == db.AttachImage:
				fmt.Fprintf(&b, "\n\n[An image (%s) is attached, but this model cannot see images.]", f.Name)
			case f.Kind == db.AttachAudio:
				fmt.Fprintf(&b, "\n\n[An audio file (%s) is attached, but the model cannot hear it.]", f.Name)
			}
		}
		msg.Content = strings.TrimPrefix(b.String(), "\n\n")
		out = append(out, msg)
	}
	return out, nil
}

// ClearReader is the part of a Store that reads context clears (/clear).
// A Store without it (a test double) sends every turn.
type ClearReader interface {
	ContextClears(ctx context.Context, user, thread int64, under []int64) ([]db.Message, error)
}

// applyClear finds the context clear hanging under the deepest message of
// the path and returns it with the turns after it. A clear under the user
// message being answered is for what comes after that answer: the message
// itself is always sent.
func (rt *Runtime) applyClear(ctx context.Context, user, thread int64, path []db.Message) (*db.Message, []db.Message, error) {
	cr, ok := rt.store.(ClearReader)
	if !ok || len(path) == 0 {
		return nil, path, nil
	}
	ids := make([]int64, len(path))
	for i, m := range path {
		ids[i] = m.ID
	}
	nodes, err := cr.ContextClears(ctx, user, thread, ids)
	if err != nil || len(nodes) == 0 {
		return nil, path, err
	}
	n, turns := cutAtClear(path, nodes)
	return n, turns, nil
}

// cutAtClear is applyClear's choice, over the clear nodes of the path.
func cutAtClear(path []db.Message, nodes []db.Message) (*db.Message, []db.Message) {
	at := map[int64]*db.Message{}
	for i := range nodes { // newest first: keep the first seen per parent
		if p := nodes[i].ParentID; p != nil && at[*p] == nil {
			at[*p] = &nodes[i]
		}
	}
	last := len(path) - 1
	if path[last].Role == db.RoleUser {
		last--
	}
	for i := last; i >= 0; i-- {
		if n := at[path[i].ID]; n != nil {
			return n, path[i+1:]
		}
	}
	return nil, path
}

// applySummary picks the newest compaction node hanging under the deepest
// message of the path and returns it with the turns it does not cover.
func applySummary(path []db.Message, nodes []db.Message) (*db.Message, []db.Message) {
	at := map[int64]*db.Message{}
	for i := range nodes { // newest first: keep the first seen per parent
		if p := nodes[i].ParentID; p != nil && at[*p] == nil {
			at[*p] = &nodes[i]
		}
	}
	// The last message is the one being answered: a summary under it would
	// leave nothing to answer, so it is never applied there.
	for i := len(path) - 2; i >= 0; i-- {
		if n := at[path[i].ID]; n != nil {
			return n, path[i+1:]
		}
	}
	return nil, path
}

// systemPrompt joins the non-empty parts in their fixed order; room is a
// room agent's preamble (chat/rooms_run.go), which goes before its prompt.
func systemPrompt(cs db.ContextSources, room, memory string, summary *db.Message, routeContext string) string {
	var parts []string
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	add(cs.SystemPrompt)
	add(cs.Instructions)
	add(room)
	if cs.Role != nil {
		add(cs.Role.Prompt)
	}
	if n := strings.TrimSpace(cs.Thread.Notes); n != "" {
		add("Notes from the user for this conversation:\n" + n)
	}
	add(memory)
	if summary != nil && strings.TrimSpace(summary.Content) != "" {
		add("Summary of the earlier part of this conversation (those messages are not repeated below):\n" + summary.Content)
	}
	add(routeContext)
	return strings.Join(parts, "\n\n")
}

// roleOptions turns a role's parameters into Ollama options.
func roleOptions(role *db.Role) map[string]any {
	o := map[string]any{}
	if role == nil {
		return o
	}
	p := role.Params
	if p.Temperature != nil {
		o["temperature"] = *p.Temperature
	}
	if p.TopP != nil {
		o["top_p"] = *p.TopP
	}
	if p.TopK != nil {
		o["top_k"] = *p.TopK
	}
	if p.RepeatPenalty != nil {
		o["repeat_penalty"] = *p.RepeatPenalty
	}
	if p.Seed != nil {
		o["seed"] = *p.Seed
	}
	if p.NumPredict != nil {
		o["num_predict"] = *p.NumPredict
	}
	if len(p.Stop) > 0 {
		o["stop"] = p.Stop
	}
	return o
}

func toAPIMessages(path []db.Message) []api.Message {
	out := make([]api.Message, 0, len(path))
	for _, m := range path {
		if m.Role == db.RoleAssistant && m.Content == "" {
			continue // an answer that never got text says nothing to the model
		}
		out = append(out, api.Message{Role: m.Role, Content: m.Content})
	}
	return out
}

func ptr[T any](v T) *T { return &v }
