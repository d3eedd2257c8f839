package importer

import (
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
