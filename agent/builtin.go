package agent

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"weft/db"
)

// Names of the tools the loop treats specially.
const (
	ToolAskUser  = "ask_user"
	ToolSearchKB = "search_knowledge_base"
)

// kbTool searches the thread's knowledge bases through rag, with the
// user's own authorization.
func kbTool() Tool {
	return Tool{
		Name:        ToolSearchKB,
		Description: "Search the knowledge bases attached to this thread. Returns numbered passages with their document and section.",
		Class:       ClassRead,
		Params: []Param{
			{Name: "query", Type: "string", Description: "What to look for, in words likely to appear in the documents", Required: true},
			{Name: "top_k", Type: "integer", Description: "How many passages to return (1-20, default 5)"},
		},
		Run: func(ctx context.Context, env *Env, args Args) (Result, error) {
			q, err := args.String("query", true)
			if err != nil {
				return Result{}, err
			}
			if strings.TrimSpace(q) == "" {
				return Result{}, Errorf("the query is empty")
			}
			k, err := args.Int("top_k", 5)
			if err != nil {
				return Result{}, err
			}
			k = min(max(k, 1), 20)
			if env.SearchKB == nil {
				return Result{}, Errorf("knowledge-base search is not available")
			}
			hits, err := env.SearchKB(ctx, q, k)
			if err != nil {
				return Result{}, err
			}
			if len(hits) == 0 {
				return Result{Output: "Nothing relevant was found for: " + q}, nil
			}
			var b strings.Builder
			var res Result
			for i, h := range hits {
				label := h.Document
				if len(h.Headings) > 0 {
					label += " › " + strings.Join(h.Headings, " › ")
				}
				if h.Page > 0 {
					label += fmt.Sprintf(" (page %d)", h.Page)
				}
				fmt.Fprintf(&b, "[%d] %s\n%s\n\n", i+1, label, h.Text)
				res.Sources = append(res.Sources, Source{Kind: "kb", Label: label, DocumentID: h.DocumentID, ChunkID: h.ChunkID})
			}
			res.Output = capText(b.String(), 64<<10)
			return res, nil
		},
	}
}

// askTool asks the user up to 4 multiple-choice questions; the loop runs it
// (it waits for the answer), so it has no Run of its own.
func askTool() Tool {
	return Tool{
		Name: ToolAskUser,
		Description: "Ask the user up to 4 multiple-choice questions when you cannot proceed without a decision. " +
			"Each question has 2 to 6 short options; mark at most one as recommended. " +
			"Without an answer within 3 minutes the recommended option is taken.",
		Class: ClassAsk,
		Params: []Param{
			{Name: "questions", Type: "array", Required: true, Description: "The questions",
				Items: map[string]any{"type": "object", "properties": map[string]any{
					"question":    map[string]any{"type": "string"},
					"options":     map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
					"recommended": map[string]any{"type": "integer", "description": "index of the recommended option"},
				}, "required": []string{"question", "options"}}},
		},
	}
}

// Limits of ask_user (DESIGN §9).
const (
	maxQuestions  = 4
	minOptions    = 2
	maxOptions    = 6
	maxChoiceText = 300
)

// parseQuestions validates ask_user's arguments; the recommended option is
// moved to the front.
func parseQuestions(args Args) ([]db.Question, error) {
	raw, ok := args["questions"].([]any)
	if !ok || len(raw) == 0 {
		return nil, Errorf("questions must be a list of 1 to %d questions", maxQuestions)
	}
	if len(raw) > maxQuestions {
		return nil, Errorf("at most %d questions at a time (got %d)", maxQuestions, len(raw))
	}
	out := make([]db.Question, 0, len(raw))
	for i, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, Errorf("question %d must be an object with question and options", i+1)
		}
		qa := Args(m)
		text, err := qa.String("question", true)
		if err != nil || strings.TrimSpace(text) == "" {
			return nil, Errorf("question %d has no text", i+1)
		}
		opts, ok := m["options"].([]any)
		if !ok || len(opts) < minOptions || len(opts) > maxOptions {
			return nil, Errorf("question %d must have %d to %d options", i+1, minOptions, maxOptions)
		}
		q := db.Question{Text: clip(text, 1000), Recommended: -1}
		for j, o := range opts {
			s, ok := o.(string)
			if !ok || strings.TrimSpace(s) == "" {
				return nil, Errorf("option %d of question %d must be non-empty text", j+1, i+1)
			}
			q.Options = append(q.Options, clip(strings.TrimSpace(s), maxChoiceText))
		}
		if _, has := m["recommended"]; has && m["recommended"] != nil {
			rec, err := qa.Int("recommended", -1)
			if err != nil || rec < 0 || rec >= len(q.Options) {
				return nil, Errorf("recommended of question %d must be the index of one of its options (0-%d)", i+1, len(q.Options)-1)
			}
			// The recommended option is listed first.
			first := q.Options[rec]
			q.Options = append([]string{first}, append(q.Options[:rec:rec], q.Options[rec+1:]...)...)
			q.Recommended = 0
		}
		out = append(out, q)
	}
	return out, nil
}

// answersText is what the model is told about the user's answers.
func answersText(qs []db.Question, answers []string, how string) string {
	var b strings.Builder
	b.WriteString(how)
	for i, q := range qs {
		a := "(no answer)"
		if i < len(answers) && answers[i] != "" {
			a = answers[i]
		}
		fmt.Fprintf(&b, "\nQ%d: %s\nA%d: %s", i+1, q.Text, i+1, a)
	}
	return b.String()
}

// Clip cuts s to at most n characters, marking the cut with "…".
func Clip(s string, n int) string { return clip(s, n) }

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// CapText cuts s to at most n bytes without splitting a character, and
// says how much was left out: a tool's output, as the model reads it.
func CapText(s string, n int) string { return capText(s, n) }

// capText cuts s to at most n bytes without splitting a character.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[truncated: %d more bytes]", len(s)-cut)
}
