package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/internal/usererr"
)

// Compaction: when a thread's path no longer fits the model's context
// window, the older turns are summarized by the model into a compaction
// node — a "system" message hanging under the last turn it covers. Requests
// then send the summary (in the system message) and the turns after it.
// The summarized messages stay in the tree and on the page; switching
// compaction off for the thread sends them in full again.

// ErrNothingToCompact is returned when a path has no older turns to
// summarize.
var ErrNothingToCompact = usererr.New("nothing to summarize yet: only the latest turn is in the conversation")

const summaryPrompt = "You summarize conversations so that they can continue without the original messages. " +
	"Write a concise summary of the conversation below: the user's goals and preferences, facts, names, numbers, " +
	"decisions, code and open questions, in the language of the conversation. " +
	"If an earlier summary is given, merge it into the new one. Reply with the summary only."

// summaryTokens caps the length of one summary.
const summaryTokens = 512

// keepShare is the share of the prompt budget the turns kept after an
// automatic compaction may use, so that the next sends fit as well.
const keepShare = 0.5

// needsCompaction reports whether the request should be compacted before
// it is sent: it does not fit, or fills the window past the ratio — and
// summarizing can help, that is the fixed parts (system prompt, role, notes,
// sources) leave room for turns.
func (a Assembly) needsCompaction(ratio float64) bool {
	if !a.Sources.Thread.Compaction {
		return false
	}
	if a.SystemTokens >= int(float64(a.Budget)*keepShare) {
		return false
	}
	return a.Estimate > a.Budget || a.Fill() > ratio
}

// splitForCompaction chooses the turns to summarize: everything before the
// newest turns that fit into keep tokens, so that the kept part starts at a
// user message. The last turn (the message being answered) is always kept.
// It returns how many of a.Turns are covered (0: nothing to summarize).
func splitForCompaction(turns []db.Message, keep int, charsPerToken float64) int {
	if len(turns) < 2 {
		return 0
	}
	used := 0
	start := len(turns) - 1
	used += messageTokens(turns[start].Content, charsPerToken)
	for i := start - 1; i >= 0; i-- {
		t := messageTokens(turns[i].Content, charsPerToken)
		if used+t > keep {
			break
		}
		used += t
		start = i
	}
	// Keep whole exchanges: the kept part begins with a user message.
	for start < len(turns)-1 && turns[start].Role != db.RoleUser {
		start++
	}
	return start
}

// compactFor summarizes the turns of a that the split leaves out and stores
// the summary under the last of them.
func (rt *Runtime) compactFor(ctx context.Context, user int64, a Assembly, covered int, auto bool) (db.Message, error) {
	if covered <= 0 {
		return db.Message{}, ErrNothingToCompact
	}
	prev := ""
	prevCovers := 0
	if a.Summary != nil {
		prev = a.Summary.Content
		if c := a.Summary.Metadata.Compaction; c != nil {
			prevCovers = c.Covers
		}
	}
	turns := a.Turns[:covered]
	summary, usage, err := rt.summarize(ctx, a.Model, a.NumCtx, a.CharsPerToken, prev, turns)
	if err != nil {
		return db.Message{}, err
	}
	meta := db.MessageMeta{Model: a.Model, Compaction: &db.Compaction{
		Covers:         prevCovers + covered,
		Through:        turns[len(turns)-1].ID,
		Auto:           auto,
		TokensBefore:   a.Estimate,
		SummaryPrompt:  usage.PromptEvalCount,
		SummaryOutput:  usage.EvalCount,
		SummarizedAt:   time.Now().UTC().Format(time.RFC3339),
		ReplacedTokens: estimateTokens(toAPIMessages(turns), a.CharsPerToken),
	}}
	return rt.store.AddCompaction(ctx, user, turns[len(turns)-1].ID, summary, meta)
}

// summarize asks the model for a summary of turns, merged with an earlier
// summary. Turns that do not fit one request are summarized in pieces, each
// piece merged into the summary of the ones before it.
func (rt *Runtime) summarize(ctx context.Context, model string, numCtx int, cpt float64, prev string, turns []db.Message) (string, api.Metrics, error) {
	lines := make([]string, len(turns))
	for i, m := range turns {
		lines[i] = transcriptLine(m)
	}
	return rt.summarizeLines(ctx, summaryJob{Prompt: summaryPrompt, Heading: "Conversation:", MaxTokens: summaryTokens},
		model, numCtx, cpt, prev, lines)
}

// summaryJob is what one kind of summary asks for: the instructions, the
// heading of the transcript, and the longest summary (num_predict).
type summaryJob struct {
	Prompt    string
	Heading   string
	MaxTokens int
}

// summarizeLines is the summary machinery shared by thread compaction and
// an agent run's checkpoints: lines (a transcript, one entry per message)
// are summarized, merged with prev; lines that do not fit one request are
// summarized in pieces, each merged into the summary of the ones before.
func (rt *Runtime) summarizeLines(ctx context.Context, job summaryJob, model string, numCtx int, cpt float64, prev string, lines []string) (string, api.Metrics, error) {
	if job.MaxTokens <= 0 {
		job.MaxTokens = summaryTokens
	}
	// The room for the transcript in one request: the window minus the
	// instructions, the earlier summary and the summary being written.
	room := numCtx - job.MaxTokens - messageTokens(job.Prompt, cpt) - 2*MessageOverhead - 64
	var total api.Metrics
	summary := prev
	for len(lines) > 0 {
		avail := room - messageTokens(summary, cpt)
		if avail < 64 {
			avail = 64
		}
		var b strings.Builder
		n := 0
		for n < len(lines) {
			line := lines[n]
			t := messageTokens(line, cpt) - MessageOverhead
			if n > 0 && messageTokens(b.String(), cpt)+t > avail {
				break
			}
			if n == 0 && t > avail {
				line = clipMiddle(line, int(float64(avail)*cpt))
			}
			b.WriteString(line)
			n++
		}
		lines = lines[n:]
		content := job.Heading + "\n" + b.String()
		if summary != "" {
			content = "Earlier summary:\n" + summary + "\n\n" + content
		}
		req := &api.ChatRequest{
			Model:  model,
			Stream: ptr(false),
			Messages: []api.Message{
				{Role: db.RoleSystem, Content: job.Prompt},
				{Role: db.RoleUser, Content: content},
			},
			Options: map[string]any{"num_ctx": numCtx, "num_predict": job.MaxTokens, "temperature": 0.2},
		}
		var out strings.Builder
		var done bool
		err := rt.llm.Chat(ctx, req, func(resp api.ChatResponse) error {
			out.WriteString(resp.Message.Content)
			if resp.Done {
				done = true
				total.PromptEvalCount += resp.Metrics.PromptEvalCount
				total.EvalCount += resp.Metrics.EvalCount
			}
			return nil
		})
		if err == nil && !done {
			err = ctx.Err()
			if err == nil {
				err = errors.New("the model server ended the summary early")
			}
		}
		if err != nil {
			return "", total, err
		}
		s := strings.TrimSpace(stripThinking(out.String()))
		if s == "" {
			return "", total, errors.New("the model wrote an empty summary")
		}
		summary = s
	}
	return summary, total, nil
}

func transcriptLine(m db.Message) string {
	who := "User"
	if m.Role == db.RoleAssistant {
		who = "Assistant"
	}
	if m.Speaker != "" {
		who = speakerLabel(m) // a room's: who said it
	}
	return who + ": " + strings.TrimSpace(m.Content) + "\n\n"
}

// clipMiddle keeps the start and the end of s within n runes.
func clipMiddle(s string, n int) string {
	if utf8.RuneCountInString(s) <= n || n < 20 {
		return s
	}
	r := []rune(s)
	half := (n - 5) / 2
	return string(r[:half]) + " […] " + string(r[len(r)-half:])
}

// stripThinking drops a <think>…</think> block some models write inline.
func stripThinking(s string) string {
	if i := strings.Index(s, "</think>"); i >= 0 {
		return s[i+len("</think>"):]
	}
	return s
}

// Compact summarizes a thread's active branch on demand: everything but the
// latest exchange. The thread's model writes the summary.
func (rt *Runtime) Compact(ctx context.Context, user, thread int64) (db.Message, error) {
	t, err := rt.store.Thread(ctx, user, thread)
	if err != nil {
		return db.Message{}, err
	}
	if t.ActiveLeafID == nil {
		return db.Message{}, ErrNothingToCompact
	}
	if t.Model == "" {
		return db.Message{}, ErrNoModel
	}
	if !t.Compaction {
		return db.Message{}, ErrCompactionOff
	}
	a, err := rt.Assemble(ctx, ContextRequest{User: user, Thread: thread, Leaf: *t.ActiveLeafID})
	if err != nil {
		return db.Message{}, err
	}
	// Keep the latest exchange: from the last user message on.
	covered := 0
	for i := len(a.Turns) - 1; i >= 0; i-- {
		if a.Turns[i].Role == db.RoleUser {
			covered = i
			break
		}
	}
	m, err := rt.compactFor(ctx, user, a, covered, false)
	if err != nil && !errors.Is(err, ErrNothingToCompact) {
		slog.Warn("compaction", "thread", thread, "err", err)
		return db.Message{}, usererr.Wrap(fmt.Errorf("%w: %w", ErrCompactionFailed, err), ErrCompactionFailed.Error()+": "+rt.describe(err, a.Model))
	}
	return m, err
}

// ErrCompactionOff and ErrCompactionFailed explain a refused manual
// compaction.
var (
	ErrCompactionOff    = usererr.New("compaction is switched off for this thread; switch it on in the thread's settings first")
	ErrCompactionFailed = errors.New("the summary could not be written")
)
