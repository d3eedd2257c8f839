package fakeollama

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
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
// A non-streamed request ("stream": false) is a summary request when one of
// its system messages contains "summar" (any case): the reply is one chunk
// "Summary: <first 12 words of the LAST user message>" (directives removed;
// "Summary: Empty" when there are none). Any other non-streamed request is
// taken to be a title request: the reply is one chunk "Title: <first 3
// words of the first user message>" (directives removed). In both cases
// directives are ignored.
//
// Otherwise, directives in the content of the LAST user message drive the
// reply (several may be combined; they are removed from the echoed text):
//
//	[[slow:200ms]]             delay before each chunk (a Go duration, or a number of milliseconds)
//	[[tokens:N]]               N content chunks "tok1 ", "tok2 ", ... instead of the echo
//	[[think]]                  3 thinking chunks first (ThinkingChunks), unless the request has "think": false
//	[[error-before:404]]       that status instead of a reply; 404 says `model "NAME" not found, try pulling it first`, others "internal error"
//	[[error-after:N]]          an {"error":"fake: model crashed"} line after N content chunks (N = 0: a 500 status instead)
//	[[hang]]                   never send the done line
//	[[tool:NAME {"k":"v"}]]    a tool call (arguments optional, a JSON object; may repeat)
//
// Without [[tokens]] or [[tool]], the content is "You said: <last user
// message>" split into word chunks that keep their trailing spaces, so the
// chunks concatenate back to the exact text. With [[tool]] and no
// [[tokens]], there is no content, only the tool calls.
func DefaultReply(req *api.ChatRequest) Reply {
	if req.Stream != nil && !*req.Stream {
		if isSummaryRequest(req) {
			return Reply{Chunks: []string{summaryFor(req)}}
		}
		return Reply{Chunks: []string{titleFor(req)}}
	}
	last := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			last = req.Messages[i].Content
			break
		}
	}
	d := parseDirectives(last)
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
		rep.Chunks = SplitWords("You said: " + d.text)
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

type directives struct {
	slow      time.Duration
	tokens    int // -1: not given
	think     bool
	errBefore int
	errAfter  int // -1: not given
	hang      bool
	tools     []api.ToolCall
	text      string // the message without directives
}

// parseDirectives finds the [[...]] directives in s. Text that looks like a
// directive but is not a valid one is left in the text.
func parseDirectives(s string) directives {
	d := directives{tokens: -1, errAfter: -1}
	var text strings.Builder
	found := false
	rest := s
	for {
		i := strings.Index(rest, "[[")
		if i < 0 {
			text.WriteString(rest)
			break
		}
		text.WriteString(rest[:i])
		n, ok := d.parseOne(rest[i+2:])
		if !ok {
			text.WriteString("[[")
			rest = rest[i+2:]
			continue
		}
		found = true
		rest = rest[i+2+n:]
	}
	d.text = text.String()
	if found {
		d.text = strings.Join(strings.Fields(d.text), " ")
	}
	return d
}

// parseOne parses one directive from s (just after "[["); it returns how
// many bytes of s it used, "]]" included.
func (d *directives) parseOne(s string) (int, bool) {
	if strings.HasPrefix(s, "tool:") {
		return d.parseTool(s)
	}
	end := strings.Index(s, "]]")
	if end < 0 {
		return 0, false
	}
	name, arg, hasArg := strings.Cut(s[:end], ":")
	name, arg = strings.TrimSpace(name), strings.TrimSpace(arg)
	used := end + 2
	switch name {
	case "think":
		d.think = true
	case "hang":
		d.hang = true
	case "slow":
		dur, err := time.ParseDuration(arg)
		if err != nil {
			ms, err2 := strconv.Atoi(arg)
			if err2 != nil || !hasArg {
				return 0, false
			}
			dur = time.Duration(ms) * time.Millisecond
		}
		d.slow = dur
	case "tokens", "error-before", "error-after":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 0 {
			return 0, false
		}
		switch name {
		case "tokens":
			d.tokens = n
		case "error-before":
			if n == 0 {
				return 0, false
			}
			d.errBefore = n
		case "error-after":
			d.errAfter = n
		}
	default:
		return 0, false
	}
	return used, true
}

// parseTool parses `tool:NAME {json}]]` or `tool:NAME]]`.
func (d *directives) parseTool(s string) (int, bool) {
	pos := len("tool:")
	j := pos
	for j < len(s) && !unicode.IsSpace(rune(s[j])) && !strings.HasPrefix(s[j:], "]]") {
		j++
	}
	name := s[pos:j]
	if name == "" {
		return 0, false
	}
	for j < len(s) && unicode.IsSpace(rune(s[j])) {
		j++
	}
	args := api.NewToolCallFunctionArguments()
	if !strings.HasPrefix(s[j:], "]]") {
		dec := json.NewDecoder(strings.NewReader(s[j:]))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, false
		}
		if err := json.Unmarshal(raw, &args); err != nil {
			return 0, false
		}
		j += int(dec.InputOffset())
		for j < len(s) && unicode.IsSpace(rune(s[j])) {
			j++
		}
		if !strings.HasPrefix(s[j:], "]]") {
			return 0, false
		}
	}
	d.tools = append(d.tools, api.ToolCall{Function: api.ToolCallFunction{Name: name, Arguments: args}})
	return j + 2, true
}
