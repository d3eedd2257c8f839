package fakeollama

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/ollama/ollama/api"
)

// Parsing the [[…]] directives of DefaultReply from the last user message.

// injected is the round to parse a tool message for: only its
// [[tool:...]] directives make tool calls, and [[error@N]] never applies.
const injected = -1

type directives struct {
	round     int // the round parsed for (see parseRound)
	slow      time.Duration
	tokens    int // -1: not given
	think     bool
	errBefore int
	errAfter  int  // -1: not given
	crash     bool // an [[error@N]] for the round parsed for
	hang      bool
	tools     []api.ToolCall // the tool calls of the round parsed for
	text      string         // the message without directives
}

// parseDirectives finds the [[...]] directives in s, for round 0.
func parseDirectives(s string) directives { return parseRound(s, 0) }

// parseRound finds the [[...]] directives in s. Text that looks like a
// directive but is not a valid one is left in the text. Every valid
// directive is removed from the text, but only the tool calls and
// [[error@N]] of round are kept: [[tool:...]] in round 0 (and for
// injected), [[tool@N:...]] in round N, [[tool*:...]] in every round >= 0.
func parseRound(s string, round int) directives {
	d := directives{tokens: -1, errAfter: -1, round: round}
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
	switch {
	case strings.HasPrefix(s, "tool:"):
		return d.parseTool(s, len("tool:"), d.round == 0 || d.round == injected, false)
	case strings.HasPrefix(s, "tool*:"):
		return d.parseTool(s, len("tool*:"), d.round >= 0, true)
	case strings.HasPrefix(s, "tool@"):
		rest := s[len("tool@"):]
		n, w := leadingNumber(rest)
		if w == 0 || !strings.HasPrefix(rest[w:], ":") {
			return 0, false
		}
		return d.parseTool(s, len("tool@")+w+1, n == d.round, false)
	}
	end := strings.Index(s, "]]")
	if end < 0 {
		return 0, false
	}
	name, arg, hasArg := strings.Cut(s[:end], ":")
	name, arg = strings.TrimSpace(name), strings.TrimSpace(arg)
	used := end + 2
	if digits, ok := strings.CutPrefix(name, "error@"); ok {
		n, w := leadingNumber(digits)
		if w == 0 || w != len(digits) || hasArg {
			return 0, false
		}
		d.crash = d.crash || n == d.round
		return used, true
	}
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

// leadingNumber parses the decimal digits at the start of s; width is how
// many bytes they take (0 when there are none or the number overflows).
func leadingNumber(s string) (n, width int) {
	for width < len(s) && s[width] >= '0' && s[width] <= '9' {
		width++
	}
	n, err := strconv.Atoi(s[:width])
	if err != nil {
		return 0, 0
	}
	return n, width
}

// roundPlaceholder stands for "{{round}}" while finding where the arguments
// of a [[tool*:...]] end: as long, and valid both as a JSON number and in a
// JSON string.
const roundPlaceholder = "100000000"

// parseTool parses `NAME {json}]]` or `NAME]]` from s[pos:] (s starts just
// after "[["). It appends the call to d.tools when keep. With templ,
// "{{round}}" in the arguments is replaced by d.round before decoding.
func (d *directives) parseTool(s string, pos int, keep, templ bool) (int, bool) {
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
		probe := s[j:]
		if templ {
			probe = strings.ReplaceAll(probe, "{{round}}", roundPlaceholder)
		}
		dec := json.NewDecoder(strings.NewReader(probe))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, false
		}
		n := int(dec.InputOffset())
		if templ {
			raw = []byte(strings.ReplaceAll(s[j:j+n], "{{round}}", strconv.Itoa(max(d.round, 0))))
		}
		if err := json.Unmarshal(raw, &args); err != nil {
			return 0, false
		}
		j += n
		for j < len(s) && unicode.IsSpace(rune(s[j])) {
			j++
		}
		if !strings.HasPrefix(s[j:], "]]") {
			return 0, false
		}
	}
	if keep {
		d.tools = append(d.tools, api.ToolCall{Function: api.ToolCallFunction{Name: name, Arguments: args}})
	}
	return j + 2, true
}
