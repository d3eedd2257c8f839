package fakeollama

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/ollama/ollama/api"
)

// CrashText is the mid-stream error text of the [[error-after:N]] directive.
const CrashText = "fake: model crashed"

// ThinkingChunks are the thinking chunks of the [[think]] directive.
var ThinkingChunks = []string{"Let me think. ", "The user wrote something. ", "I will answer."}

// DefaultReply is the reply logic used when no script is set. It is
// exported so that scripts can fall back to it.
//
// A request with a "format" (structured output, streamed or not) gets one
// chunk of JSON in that format made from the last user message (see
// formatReply: a schema's strings are that message); directives are
// removed and ignored.
//
// A non-streamed request ("stream": false) is a summary request when one of
// its system messages contains "summar" (any case): the reply is one chunk
// "Summary: <first 12 words of the LAST user message>" (directives removed;
// "Summary: Empty" when there are none). Any other non-streamed request is
// taken to be a title request: the reply is one chunk "Title: <first 3
// words of the first user message>" (directives removed). In both cases
// directives are ignored, and so are tool rounds (below): a tool loop must
// stream.
//
// Otherwise, directives in the content of the LAST user message drive the
// reply (several may be combined; they are removed from the echoed text):
//
//	[[slow:200ms]]             delay before each chunk (a Go duration, or a number of milliseconds); applies to every tool round
//	[[tokens:N]]               N content chunks "tok1 ", "tok2 ", ... instead of the echo
//	[[think]]                  3 thinking chunks first (ThinkingChunks), unless the request has "think": false
//	[[error-before:404]]       that status instead of a reply; 404 says `model "NAME" not found, try pulling it first`, others "internal error"
//	[[error-after:N]]          an {"error":"fake: model crashed"} line after N content chunks (N = 0: a 500 status instead)
//	[[hang]]                   never send the done line
//	[[tool:NAME {"k":"v"}]]    a tool call in round 0 (arguments optional, a JSON object; may repeat)
//	[[tool@N:NAME {"k":"v"}]]  a tool call in round N (N >= 0; [[tool@0:...]] is [[tool:...]])
//	[[tool*:NAME {"k":"v"}]]   a tool call in every round; "{{round}}" in its arguments is replaced by the round number before decoding
//	[[error@N]]                round N fails with a 500 status "fake: model crashed" (CrashText) instead of a reply
//
// Without [[tokens]] or tool calls, the content is "You said: <last user
// message>" split into word chunks that keep their trailing spaces, so the
// chunks concatenate back to the exact text. With tool calls and no
// [[tokens]], there is no content, only the tool calls.
//
// Tool rounds. The round of a request is the number of "assistant" messages
// after its last user message (0 when there is none, or no user message at
// all): a client running a tool loop sends back the assistant message with
// its tool_calls and one "tool" message per result, so each call of the loop
// is one round further. Round 0 is the plain case above. In a round N >= 1:
//
//   - the tool calls are the [[tool@N:...]] and [[tool*:...]] directives of
//     the last user message, in the order written, then the [[tool:...]]
//     directives found in the "tool" messages after the last assistant
//     message (the previous round's results: a gullible model that obeys a
//     prompt injection carried by a document);
//   - of the last user message's other directives, only [[slow]] and
//     [[error@N]] apply; [[tokens]], [[think]], [[error-before]],
//     [[error-after]] and [[hang]] are for round 0 only;
//   - [[think]], [[tokens:N]], [[slow:D]], [[error-before:S]] and
//     [[error-after:N]] in those tool messages apply to this round (a later
//     one wins; their [[slow]] overrides the user message's); their other
//     directives ([[hang]], [[tool@N]], [[tool*]], [[error@N]]) are removed
//     from their text but ignored;
//   - without tool calls, the content (unless [[tokens]]) is
//     "Done after N tool rounds. Last result: <the last of those tool
//     messages, directives removed, white space collapsed, cut to its first
//     200 runes>" in word chunks ("Done after N tool rounds." alone when no
//     tool message follows the last assistant message).
func DefaultReply(req *api.ChatRequest) Reply {
	if isFormatRequest(req) {
		return formatReply(req)
	}
	if req.Stream != nil && !*req.Stream {
		if isSummaryRequest(req) {
			return Reply{Chunks: []string{summaryFor(req)}}
		}
		return Reply{Chunks: []string{titleFor(req)}}
	}
	lastUser := -1
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			lastUser = i
			break
		}
	}
	if lastUser < 0 {
		return parseDirectives("").reply(req, "You said: ")
	}
	round, lastAssistant := 0, -1
	for i := lastUser + 1; i < len(req.Messages); i++ {
		if req.Messages[i].Role == "assistant" {
			round++
			lastAssistant = i
		}
	}
	d := parseRound(req.Messages[lastUser].Content, round)
	if round == 0 {
		return d.reply(req, "You said: "+d.text)
	}

	// A later round: the user message gives the scheduled tool calls,
	// [[slow]] and [[error@N]]; the previous round's results may add more.
	e := directives{tokens: -1, errAfter: -1, round: round, slow: d.slow, crash: d.crash, tools: d.tools}
	content := fmt.Sprintf("Done after %d tool rounds.", round)
	var result *string
	for _, m := range req.Messages[lastAssistant+1:] {
		if m.Role != "tool" {
			continue
		}
		t := parseRound(m.Content, injected)
		e.tools = append(e.tools, t.tools...)
		e.think = e.think || t.think
		if t.tokens >= 0 {
			e.tokens = t.tokens
		}
		if t.slow > 0 {
			e.slow = t.slow
		}
		if t.errBefore != 0 {
			e.errBefore = t.errBefore
		}
		if t.errAfter >= 0 {
			e.errAfter = t.errAfter
		}
		text := strings.Join(strings.Fields(t.text), " ")
		result = &text
	}
	if result != nil {
		r := []rune(*result)
		content = strings.TrimSpace(content + " Last result: " + strings.TrimSpace(string(r[:min(200, len(r))])))
	}
	return e.reply(req, content)
}

// reply builds the reply that d asks for; content is the text sent when
// there are neither [[tokens]] nor tool calls.
func (d directives) reply(req *api.ChatRequest, content string) Reply {
	rep := Reply{Delay: d.slow, Hang: d.hang, ToolCalls: d.tools}
	if d.errBefore != 0 {
		rep.ErrorBefore = &HTTPError{Status: d.errBefore}
		if d.errBefore == 404 {
			rep.ErrorBefore.Message = fmt.Sprintf("model %q not found, try pulling it first", req.Model)
		} else {
			rep.ErrorBefore.Message = "internal error"
		}
		return rep
	}
	if d.crash {
		rep.ErrorBefore = &HTTPError{Status: 500, Message: CrashText}
		return rep
	}
	thinkOff := req.Think != nil && req.Think.IsBool() && !req.Think.Bool()
	if d.think && !thinkOff {
		rep.Thinking = append([]string(nil), ThinkingChunks...)
	}
	switch {
	case d.tokens >= 0:
		for i := 1; i <= d.tokens; i++ {
			rep.Chunks = append(rep.Chunks, "tok"+strconv.Itoa(i)+" ")
		}
	case len(d.tools) == 0:
		rep.Chunks = SplitWords(content)
	}
	switch {
	case d.errAfter > 0:
		rep.ErrorAfter, rep.ErrorText = d.errAfter, CrashText
	case d.errAfter == 0:
		rep.ErrorBefore = &HTTPError{Status: 500, Message: CrashText}
	}
	return rep
}

// titleFor is the default non-streamed reply.
func titleFor(req *api.ChatRequest) string {
	first := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			first = m.Content
			break
		}
	}
	words := strings.Fields(parseDirectives(first).text)
	if len(words) == 0 {
		return "Title: Untitled"
	}
	return "Title: " + strings.Join(words[:min(3, len(words))], " ")
}

// isSummaryRequest: a system message mentions summar(y/ize/ise...).
func isSummaryRequest(req *api.ChatRequest) bool {
	for _, m := range req.Messages {
		if m.Role == "system" && strings.Contains(strings.ToLower(m.Content), "summar") {
			return true
		}
	}
	return false
}

// summaryFor is the default reply to a summary request.
func summaryFor(req *api.ChatRequest) string {
	last := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			last = req.Messages[i].Content
			break
		}
	}
	words := strings.Fields(parseDirectives(last).text)
	if len(words) == 0 {
		return "Summary: Empty"
	}
	return "Summary: " + strings.Join(words[:min(12, len(words))], " ")
}

// SplitWords splits s into chunks of one word and the white space after it
// (leading white space goes with the first word), so that joining the
// chunks gives s back exactly.
func SplitWords(s string) []string {
	var out []string
	start := 0
	seenWord := false
	prevSpace := false
	for i, r := range s {
		sp := unicode.IsSpace(r)
		if !sp && prevSpace && seenWord {
			out = append(out, s[start:i])
			start = i
		}
		if !sp {
			seenWord = true
		}
		prevSpace = sp
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
