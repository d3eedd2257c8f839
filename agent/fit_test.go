package agent

import (
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
)

// charTokens counts a token per 4 characters plus 4 per message.
func charTokens(msgs []api.Message) int {
	n := 0
	for _, m := range msgs {
		n += 4 + (len(m.Content)+3)/4
	}
	return n
}

func TestToolResultsThatDoNotFitAreLeftOutOldestFirstThenCut(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 4000) // 1,000 tokens
	run := []api.Message{
		{Role: "assistant", Content: "round 1"},
		{Role: "tool", Content: big},
		{Role: "assistant", Content: "round 2"},
		{Role: "tool", Content: big},
		{Role: "assistant", Content: "round 3"},
		{Role: "tool", Content: big},
	}
	orig := append([]api.Message(nil), run...)

	if got := fitToolResults(run, 100, 10_000, charTokens); charTokens(got) != charTokens(run) {
		t.Errorf("what fits was changed")
	}
	if got := fitToolResults(run, 100, 0, charTokens); charTokens(got) != charTokens(run) {
		t.Errorf("without a budget the messages were changed")
	}

	// Room for about two results: the oldest goes first.
	got := fitToolResults(run, 100, 2_300, charTokens)
	if got[1].Content != elided || got[3].Content != big || got[5].Content != big {
		t.Errorf("left out: %v %v %v", got[1].Content == elided, got[3].Content == elided, got[5].Content == elided)
	}
	if 100+charTokens(got) > 2_300 {
		t.Errorf("still over the budget: %d", 100+charTokens(got))
	}

	// Room for less than the newest result alone: older ones are left out
	// and the newest is cut, saying so.
	got = fitToolResults(run, 100, 700, charTokens)
	if got[1].Content != elided || got[3].Content != elided {
		t.Errorf("older results kept")
	}
	if !strings.Contains(got[5].Content, "[Cut here to fit the context window") || 100+charTokens(got) > 700 {
		t.Errorf("the newest result = %d chars (%d tokens in all)", len(got[5].Content), 100+charTokens(got))
	}
	for i := range run {
		if run[i].Content != orig[i].Content {
			t.Fatalf("the run's own messages were modified")
		}
	}
}
