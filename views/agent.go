package views

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"weft/db"
)

// traceRound is a model turn with the steps it led to.
type traceRound struct {
	Turn  *db.Step
	Items []db.Step
}

// traceRounds groups steps by model turn; steps before the first turn (the
// start) are left out.
func traceRounds(steps []db.Step) []traceRound {
	var out []traceRound
	for i := range steps {
		s := steps[i]
		switch s.Kind {
		case db.StepModelTurn:
			out = append(out, traceRound{Turn: &steps[i]})
		case db.StepToolCall, db.StepApproval, db.StepQuestion, db.StepSteer, db.StepCompaction:
			if len(out) == 0 {
				out = append(out, traceRound{})
			}
			out[len(out)-1].Items = append(out[len(out)-1].Items, s)
		}
	}
	// A final turn without calls still counts as a round in the debug view,
	// but shows no card in the trace.
	return out
}

// hasLateSteer reports whether a steering message arrived after the run's
// last round (the trace opens to show it).
func hasLateSteer(steps []db.Step) bool {
	for _, s := range steps {
		if s.Kind == db.StepSteer && s.Status == db.StepNotTaken {
			return true
		}
	}
	return false
}

func countKind(steps []db.Step, kind string) int {
	n := 0
	for _, s := range steps {
		if s.Kind == kind {
			n++
		}
	}
	return n
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return clipText(b.String(), 300)
}

func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func stepStatusLabel(s string) string {
	switch s {
	case db.StepRunning:
		return "running…"
	case db.StepOK:
		return "done"
	case db.StepError:
		return "failed"
	case db.StepRefused:
		return "refused"
	case db.StepCancelled:
		return "cancelled"
	}
	return s
}

func decisionLabel(s string) string {
	switch s {
	case db.DecideOnce:
		return "Allowed once"
	case db.DecideThread:
		return "Allowed in this thread"
	case db.DecideAlways:
		return "Always allowed in this workspace"
	case db.DecideDeny:
		return "Denied"
	case db.StepCancelled:
		return "Cancelled"
	}
	return s
}

func changeLabel(op string) string {
	switch op {
	case "created":
		return "Created"
	case "modified":
		return "Changed"
	case "deleted":
		return "Deleted"
	}
	return op
}

func sourceKindLabel(k string) string {
	switch k {
	case "file":
		return "File"
	case "kb":
		return "Knowledge base"
	case "web":
		return "Web page"
	}
	return k
}

func modeLabel(mode string, asks bool) string {
	switch {
	case mode == "ask" && !asks:
		return "allowed in this thread"
	case mode == "ask":
		return "asks first"
	case mode == "auto":
		return "runs without asking"
	}
	return mode
}

func answerAt(answers []string, i int) string {
	if i < len(answers) && answers[i] != "" {
		return answers[i]
	}
	return "(no answer)"
}

// agentMeta is what an agent answer's metadata adds.
type agentMeta struct {
	Changes []db.FileChange
	Sources []db.StepSource
}

func agentMetaOf(m db.Message) agentMeta {
	if e := m.Metadata.Evidence; e != nil {
		return agentMeta{Changes: e.Changes, Sources: e.Sources}
	}
	return agentMeta{}
}

func keyHint(set bool) string {
	if set {
		return "set (leave empty to keep)"
	}
	return "none"
}

func fileSize(n int64) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MB"
	case n >= 1<<10:
		return strconv.FormatInt(n>>10, 10) + " KB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// subName names a sub-agent on its card and in its approvals.
func subName(c db.SubRun, of int) string {
	if of <= 1 {
		return "Sub-agent"
	}
	return "Sub-agent " + strconv.Itoa(c.Sub.Index+1) + " of " + strconv.Itoa(of)
}

func subActive(c db.SubRun) bool {
	return c.Status == db.RunRunning || c.Status == db.RunWaiting || c.Status == db.RunQueued
}

// subWaits reports whether a sub-agent waits for the user (an approval or
// a question).
func subWaits(c db.SubRun) bool {
	for _, s := range c.Steps {
		if s.Status == db.StepPending && (s.Kind == db.StepApproval || s.Kind == db.StepQuestion) {
			return true
		}
	}
	return false
}

func joinNames(names []string) string { return strings.Join(names, ", ") }

// subTook is how long a finished sub-agent worked.
func subTook(c db.SubRun) string {
	d := c.FinishedAt.Sub(*c.StartedAt)
	if d < time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
}

// tailClip keeps the last n characters of s: a working sub-agent's newest
// text.
func tailClip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n:])
}

// checkpointSpan names the rounds a checkpoint covers.
func checkpointSpan(covers int) string {
	if covers <= 1 {
		return "round 1"
	}
	return "rounds 1–" + strconv.Itoa(covers)
}

func checkpointTrigger(trigger string) string {
	if trigger == db.CompactOverflow {
		return "the next request would not have fit the context window"
	}
	return "the run's own rounds filled most of the context window"
}
