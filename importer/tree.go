package importer

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"weft/db"
)

// node is one node of a foreign conversation tree, whatever the format.
type node struct {
	id      string
	parent  string // "" : a root
	order   int    // place among its parent's children (the parent's own list); -1: not listed
	created time.Time
	keep    bool // a message Weft shows; others are passed over, their children kept
	msg     db.ImportedMessage
}

// tree maps nodes onto Weft's tree: every kept node under its nearest kept
// ancestor, siblings in their original order, parents before children. It
// walks breadth first with a queue, so depth costs no stack; a node whose
// parent is missing becomes a root; nodes in a loop of parent links are
// never reached from a root and are left out (counted in unreached).
// current is the id of the node shown last (the active leaf); when it was
// passed over, its nearest kept ancestor is.
func tree(nodes []node, current string) (msgs []db.ImportedMessage, active, unreached, dups int) {
	index := make(map[string]int, len(nodes))
	for i, n := range nodes {
		if _, dup := index[n.id]; dup || n.id == "" {
			dups++
			continue
		}
		index[n.id] = i
	}
	children := make(map[int][]int, len(nodes))
	var roots []int
	for _, i := range index {
		p, ok := index[nodes[i].parent]
		if !ok || nodes[i].parent == "" || p == i {
			roots = append(roots, i)
			continue
		}
		children[p] = append(children[p], i)
	}
	sibling := func(a, b int) int {
		na, nb := nodes[a], nodes[b]
		oa, ob := na.order, nb.order
		if oa < 0 {
			oa = 1 << 30
		}
		if ob < 0 {
			ob = 1 << 30
		}
		return cmp.Or(cmp.Compare(oa, ob), na.created.Compare(nb.created), cmp.Compare(na.id, nb.id))
	}
	slices.SortFunc(roots, sibling)
	type item struct{ node, anc int }
	queue := make([]item, 0, len(index))
	for _, r := range roots {
		queue = append(queue, item{r, -1})
	}
	out := make([]int, len(nodes)) // a node's nearest kept ancestor-or-self in msgs
	visited := make([]bool, len(nodes))
	for head := 0; head < len(queue); head++ {
		it := queue[head]
		if visited[it.node] {
			continue
		}
		visited[it.node] = true
		anc := it.anc
		if n := nodes[it.node]; n.keep {
			m := n.msg
			m.Parent = anc
			msgs = append(msgs, m)
			anc = len(msgs) - 1
		}
		out[it.node] = anc
		kids := children[it.node]
		slices.SortFunc(kids, sibling)
		for _, c := range kids {
			queue = append(queue, item{c, anc})
		}
	}
	active = -1
	if i, ok := index[current]; ok && visited[i] {
		active = out[i]
	}
	for i := range index {
		if !visited[index[i]] {
			unreached++
		}
	}
	return msgs, active, unreached, dups
}

// clean makes text storable: valid UTF-8 (json.Unmarshal already replaced
// invalid bytes), no NUL (Postgres refuses it in text), at most max runes
// (cut == true when it was cut).
func clean(s string, max int) (string, bool) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	if utf8.RuneCountInString(s) <= max {
		return s, false
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i], true
		}
		n++
	}
	return s, false
}

// epoch reads a Unix time in seconds, milliseconds, microseconds or
// nanoseconds (exports differ); zero or absurd values are the zero time.
func epoch(v float64) time.Time {
	switch {
	case v <= 0 || v != v:
		return time.Time{}
	case v > 1e17:
		v /= 1e9
	case v > 1e14:
		v /= 1e6
	case v > 1e11:
		v /= 1e3
	}
	if v > 1e11 { // after the year 5000
		return time.Time{}
	}
	return time.UnixMicro(int64(math.Round(v * 1e6))).UTC()
}

// finish turns the mapped nodes into a Conversation, or a skip.
func finish(c Conversation, nodes []node, current string, lim Limits) (Conversation, error) {
	msgs, active, unreached, dups := tree(nodes, current)
	kept := 0
	for _, n := range nodes {
		if n.keep {
			kept++
		}
	}
	c.MessagesSkipped += len(nodes) - kept
	if unreached > 0 {
		c.Notes = append(c.Notes, plural(unreached, "message", "messages")+" in a loop of parent links left out")
		c.MessagesSkipped += unreached
	}
	if dups > 0 {
		c.Notes = append(c.Notes, plural(dups, "message", "messages")+" with a repeated id left out")
	}
	if len(msgs) == 0 {
		return c, skip("it has no messages with text")
	}
	c.Thread.Messages, c.Thread.ActiveLeaf = msgs, active
	if c.PartsSkipped > 0 {
		c.Notes = append(c.Notes, plural(c.PartsSkipped, "attachment or other part", "attachments or other parts")+" left out")
	}
	return c, nil
}

// maxItems bounds the items of any one JSON list or object of a
// conversation. It is checked on the raw bytes before they are decoded:
// json.Unmarshal would otherwise build millions of values (a mapping of
// three million empty nodes, a "parts" list of `1,1,1,…`) from one 32 MB
// conversation — gigabytes and tens of seconds — before any count of ours
// could refuse them.
const maxItems = 100_000

// checkWidth refuses a conversation with a list or object of more than
// max(maxItems, MaxMessages) items, in one pass over its bytes.
func checkWidth(raw []byte, lim Limits) error {
	limit := max(maxItems, lim.MaxMessages)
	var stack []int // items so far of each open list or object
	in := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if in {
			switch c {
			case '\\':
				i++
			case '"':
				in = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r', ':':
			continue
		case ',':
			if n := len(stack); n > 0 {
				if stack[n-1]++; stack[n-1] > limit {
					return skip(fmt.Sprintf("it has a list of more than %d items", limit))
				}
			}
			continue
		case ']', '}':
			if n := len(stack); n > 0 {
				stack = stack[:n-1]
			}
			continue
		}
		if n := len(stack); n > 0 && stack[n-1] == 0 {
			stack[n-1] = 1
		}
		switch c {
		case '"':
			in = true
		case '[', '{':
			stack = append(stack, 0)
		}
	}
	return nil
}

// items calls fn with each item of a JSON list (raw as json.Unmarshal
// checked it), without decoding them; anything but a list has none.
func items(raw []byte, fn func(item []byte)) {
	i := 0
	for i < len(raw) && isSpace(raw[i]) {
		i++
	}
	if i == len(raw) || raw[i] != '[' {
		return
	}
	depth, in, start := 0, false, i+1
	for i++; i < len(raw); i++ {
		c := raw[i]
		if in {
			switch c {
			case '\\':
				i++
			case '"':
				in = false
			}
			continue
		}
		switch c {
		case '"':
			in = true
		case '[', '{':
			depth++
		case ']', '}', ',':
			if depth > 0 && c != ',' {
				depth--
				continue
			}
			if depth > 0 {
				continue
			}
			if item := bytes.TrimSpace(raw[start:i]); len(item) > 0 {
				fn(item)
			}
			if c != ',' {
				return
			}
			start = i + 1
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// maxNotes is how many "[image not imported]" notes one message gets; the
// parts past them are counted only, so that a list of empty parts does
// not grow into a message many times its size.
const maxNotes = 100

// body builds a message's text from its parts: at most limit bytes (past
// them the text is cut anyway) and maxNotes notes of parts left out.
type body struct {
	b           strings.Builder
	limit       int
	notes, more int
}

func newBody(lim Limits) *body { return &body{limit: 4*lim.MaxMessageRunes + 4} }

// text adds a part of text.
func (b *body) text(s string) {
	if s == "" || b.b.Len() > b.limit {
		return
	}
	if b.b.Len() > 0 {
		b.b.WriteString("\n\n")
	}
	b.b.WriteString(s[:min(len(s), b.limit+1)])
}

// leftOut notes a part not imported where it was (a picture, a file…).
func (b *body) leftOut(c *Conversation, kind func() string) {
	c.PartsSkipped++
	if b.notes == maxNotes {
		b.more++
		return
	}
	b.notes++
	b.text("[" + kind() + " not imported]")
}

func (b *body) String() string {
	if b.more > 0 {
		b.text(fmt.Sprintf("[%d more parts not imported]", b.more))
		b.more = 0
	}
	return b.b.String()
}

// checkCount refuses a conversation with more nodes than the limit.
func checkCount(n int, lim Limits) error {
	if n > lim.MaxMessages {
		return skip(fmt.Sprintf("it has more than %d messages", lim.MaxMessages))
	}
	return nil
}

// title cleans a conversation's title.
func title(s string, lim Limits) string {
	s, _ = clean(strings.TrimSpace(s), lim.MaxTitleRunes)
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "Imported conversation"
	}
	return s
}

// text cleans a message's text, cut at the limit with a note.
func text(s string, lim Limits, c *Conversation) string {
	s, cut := clean(s, lim.MaxMessageRunes)
	if cut {
		c.Notes = append(c.Notes, fmt.Sprintf("a message longer than %d characters was cut", lim.MaxMessageRunes))
		s += "\n\n[cut on import: the message was longer]"
	}
	return s
}

// metadata is an imported message's metadata: the model that answered and
// where it came from.
func metadata(model, from string) []byte {
	m := map[string]string{"imported_from": from}
	if model, _ = clean(strings.TrimSpace(model), 200); model != "" {
		m["model"] = model
	}
	b, _ := json.Marshal(m)
	return b
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// looseTitle is the title of a conversation that could not be read, when
// it has one.
func looseTitle(raw []byte, lim Limits) string {
	var t struct {
		Title json.RawMessage `json:"title"`
	}
	var s string
	if json.Unmarshal(raw, &t) != nil || json.Unmarshal(t.Title, &s) != nil || strings.TrimSpace(s) == "" {
		return ""
	}
	return title(s, lim)
}
