package agent

import (
	"fmt"
	"unicode/utf8"

	"github.com/ollama/ollama/api"
)

// elided replaces a tool result left out of the request; the full result
// stays in the run's trace.
const elided = "[This tool result was left out to fit the context window; it is in the run's trace.]"

// fitToolResults returns the run's messages shortened so that, after the
// assembled context (fixed tokens), they fit the budget: older tool results
// are left out first, oldest first; then the newest round's results are cut
// to what still fits. msgs is not modified. Without a budget (0) nothing
// changes.
func fitToolResults(msgs []api.Message, fixed, budget int, estimate func([]api.Message) int) []api.Message {
	if budget <= 0 || fixed+estimate(msgs) <= budget {
		return msgs
	}
	out := append([]api.Message(nil), msgs...)
	// The newest round's results follow the last assistant message.
	last := len(out)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i].Role == "assistant" {
			last = i
			break
		}
	}
	for i := 0; i < last && fixed+estimate(out) > budget; i++ {
		if out[i].Role == "tool" && out[i].Content != elided {
			out[i].Content = elided
		}
	}
	over := fixed + estimate(out) - budget
	if over <= 0 {
		return out
	}
	// Cut the newest results, each by its share of what is over.
	var newest []int
	total := 0
	for i := last + 1; i < len(out); i++ {
		if out[i].Role == "tool" {
			newest = append(newest, i)
			total += estimate(out[i : i+1])
		}
	}
	if total == 0 {
		return out
	}
	for _, i := range newest {
		m := out[i]
		tokens := estimate(out[i : i+1])
		keepShare := 1 - float64(over)/float64(total)
		if keepShare < 0 {
			keepShare = 0
		}
		runes := utf8.RuneCountInString(m.Content)
		keep := int(float64(runes) * keepShare * 0.95) // a margin for the estimate's rounding
		if keep >= runes || tokens == 0 {
			continue
		}
		out[i].Content = string([]rune(m.Content)[:keep]) +
			fmt.Sprintf("\n[Cut here to fit the context window: %d more characters are in the run's trace.]", runes-keep)
	}
	return out
}
