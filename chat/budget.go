package chat

import (
	"context"
	"math"
	"unicode/utf8"

	"github.com/ollama/ollama/api"

	"weft/db"
)

// contextWindow is num_ctx: the model's context length capped by the
// instance's maximum (an admin's guard for the machine's memory), then by
// the thread's own setting, else the role's.
func contextWindow(window, instanceMax int, role *db.Role, threadNumCtx int) int {
	n := instanceMax
	if window > 0 && window < n {
		n = window
	}
	switch {
	case threadNumCtx > 0:
		n = min(n, threadNumCtx)
	case role != nil && role.Params.NumCtx != nil && *role.Params.NumCtx > 0:
		n = min(n, *role.Params.NumCtx)
	}
	return max(n, minNumCtx)
}

// minNumCtx is the smallest window sent: below it nothing useful fits.
const minNumCtx = 256

// answerReserve is the room kept for the answer: num_predict when the role
// sets it, else a quarter of the window up to 1,024 tokens.
func answerReserve(numCtx int, role *db.Role) int {
	if role != nil && role.Params.NumPredict != nil && *role.Params.NumPredict > 0 {
		return min(*role.Params.NumPredict, numCtx/2)
	}
	return min(1024, numCtx/4)
}

// sourceShare is the part of the prompt's room (the window less the
// answer's) that a rag answer's sources may take: the rest is for the
// instructions, the conversation and the question. Below keepShare, so that
// sources and instructions leave compaction room to work (needsCompaction).
// At the default window (8,192 tokens, 4 characters a token) it is about
// 11,500 characters, seven chunks of the default size.
const sourceShare = 0.4

// SourceChars is how many characters of sources fit a rag answer asked
// with num_ctx numCtx (role: the thread's, or nil), at charsPerToken.
func SourceChars(numCtx int, role *db.Role, charsPerToken float64) int {
	return int(float64(numCtx-answerReserve(numCtx, role)) * sourceShare * charsPerToken)
}

// estimateTokens estimates the prompt tokens of messages.
func estimateTokens(msgs []api.Message, charsPerToken float64) int {
	n := 0
	for _, m := range msgs {
		n += messageTokens(m.Content, charsPerToken)
	}
	return n
}

func messageTokens(content string, charsPerToken float64) int {
	return MessageOverhead + int(math.Ceil(float64(utf8.RuneCountInString(content))/charsPerToken))
}

// charsPerToken is the model's calibration, or the default.
func (rt *Runtime) charsPerToken(ctx context.Context, model string) (float64, bool) {
	cpt, n, err := rt.store.Calibration(ctx, canonicalModel(model))
	if err != nil || n == 0 || cpt <= 0 {
		return defaultCharsPerToken, false
	}
	return cpt, true
}

// Calibration limits: outside them an observation is noise.
const minCharsPerToken, maxCharsPerToken = 0.5, 16.0

// observe learns from Ollama's prompt_eval_count after an answer: it
// reports whether the prompt was truncated (Ollama drops the oldest
// messages when the prompt exceeds num_ctx), and otherwise calibrates the
// model's characters per token.
func (rt *Runtime) observe(a Assembly, promptEval int) (truncated bool) {
	if promptEval <= 0 || len(a.Messages) == 0 {
		return false
	}
	if truncatedPrompt(a, promptEval) {
		return true
	}
	if float64(promptEval) >= 0.9*float64(a.NumCtx) {
		// At the edge of the window the count may be of a cut prompt: it
		// says nothing reliable about the characters sent.
		return false
	}
	chars := 0
	for _, m := range a.Messages {
		chars += utf8.RuneCountInString(m.Content)
	}
	tokens := promptEval - MessageOverhead*len(a.Messages)
	if tokens < 8 || chars < 32 {
		return false // too little to learn from
	}
	cpt := float64(chars) / float64(tokens)
	if cpt < minCharsPerToken || cpt > maxCharsPerToken {
		return false
	}
	if a.Calibrated {
		// One answer (one user's language or code) moves the shared value
		// at most by half or double.
		cpt = min(max(cpt, a.CharsPerToken/2), a.CharsPerToken*2)
	}
	rt.calib.observe(canonicalModel(a.Model), cpt)
	return false
}

// truncatedPrompt reports whether the counted prompt is clearly smaller than
// what was sent while what was sent could not fit: Ollama cut it. Before
// the model is calibrated the estimate may be off either way, so only a
// prompt estimated over the window counts.
func truncatedPrompt(a Assembly, promptEval int) bool {
	e, n, p := float64(a.Estimate), float64(a.NumCtx), float64(promptEval)
	if p >= 0.97*n {
		// A prompt that fills the window to the brim was most likely cut to
		// fit, whatever the estimate said.
		return true
	}
	if !a.Calibrated {
		return e > n && p < 0.9*e
	}
	return e > 0.8*n && p < 0.85*e
}

// Gauge is how full the context window is for the next message of a
// thread.
type Gauge struct {
	Estimate   int // estimated prompt tokens of the next request (without the new message)
	NumCtx     int
	Summarized bool // older turns are replaced by a summary
}

// ContextGauge estimates the next request of a thread's visible branch.
func (rt *Runtime) ContextGauge(ctx context.Context, user, thread int64) (Gauge, error) {
	t, err := rt.store.Thread(ctx, user, thread)
	if err != nil {
		return Gauge{}, err
	}
	var leaf int64
	if t.ActiveLeafID != nil {
		leaf = *t.ActiveLeafID
	}
	a, err := rt.Assemble(ctx, ContextRequest{User: user, Thread: thread, Leaf: leaf})
	if err != nil {
		return Gauge{}, err
	}
	return Gauge{Estimate: a.Estimate, NumCtx: a.NumCtx, Summarized: a.Summary != nil}, nil
}
