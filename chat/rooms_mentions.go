package chat

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"weft/db"
)

// Mentions (issue 20): "@name" addresses a room's agent. A mention starts
// at "@" that no letter, digit or underscore precedes (so an email address
// is not one) and takes the longest agent-name-shaped run after it
// (db: ^[A-Za-z][A-Za-z0-9_-]{0,31}$), compared case-insensitively. Code
// (fenced blocks and `inline` spans) mentions nobody: an agent quoting a
// decorator or a shell prompt does not wake another.

var (
	mentionRe = regexp.MustCompile(`@([A-Za-z][A-Za-z0-9_-]{0,31})`)
	fencedRe  = regexp.MustCompile("(?s)```.*?(```|$)")
	inlineRe  = regexp.MustCompile("`[^`\n]*`")
)

// mentionedAgents returns the agents text mentions, in the order of their
// first mention, each once. A name that is no agent's is plain text (it may
// name a member).
func mentionedAgents(text string, agents []db.RoomAgent) []db.RoomAgent {
	byName := make(map[string]db.RoomAgent, len(agents))
	for _, a := range agents {
		byName[strings.ToLower(a.Name)] = a
	}
	text = inlineRe.ReplaceAllString(fencedRe.ReplaceAllString(text, " "), " ")
	var out []db.RoomAgent
	seen := map[int64]bool{}
	for _, loc := range mentionRe.FindAllStringSubmatchIndex(text, -1) {
		if loc[0] > 0 {
			r, _ := utf8.DecodeLastRuneInString(text[:loc[0]])
			if r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) {
				continue
			}
		}
		if loc[1] < len(text) {
			// Longer than a name may be: not a mention.
			if r, _ := utf8.DecodeRuneInString(text[loc[1]:]); r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r) {
				continue
			}
		}
		name := strings.ToLower(text[loc[2]:loc[3]])
		a, ok := byName[name]
		if !ok {
			// "@writer-" or "@writer_" ending a phrase.
			a, ok = byName[strings.TrimRight(name, "-_")]
		}
		if ok && !seen[a.ID] {
			seen[a.ID] = true
			out = append(out, a)
		}
	}
	return out
}

// routeMessage chooses the agents that answer a member's message: those it
// mentions; none mentioned, the room's default agent; no default agent,
// nobody (the message is only posted).
func routeMessage(text string, agents []db.RoomAgent, defaultAgent *int64) []db.RoomAgent {
	if m := mentionedAgents(text, agents); len(m) > 0 {
		return m
	}
	if defaultAgent != nil {
		for _, a := range agents {
			if a.ID == *defaultAgent {
				return []db.RoomAgent{a}
			}
		}
	}
	return nil
}
