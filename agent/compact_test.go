package agent

import (
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"weft/db"
)

func TestSplitRoundsKeepsTheNewestRoundsThatFitAndSummarizesAtLeastOne(t *testing.T) {
	t.Parallel()
	round := func(result string) []api.Message {
		return []api.Message{{Role: "assistant"}, {Role: "tool", Content: result}}
	}
	var msgs []api.Message
	for _, r := range []string{"a", "b", "c", "d"} {
		msgs = append(msgs, round(strings.Repeat(r, 400))...) // 100 + 8 tokens a round
	}
	steered := append(append([]api.Message(nil), msgs...), api.Message{Role: "user", Content: "steer"})
	checkpointed := append([]api.Message{{Role: "user", Content: "[Checkpoint]"}}, msgs...)
	cases := []struct {
		name       string
		msgs       []api.Message
		base, keep int
		want       int
	}{
		{"two rounds fit: the first two are summarized", msgs, 0, 230, 4},
		{"nothing fits: all but the newest round", msgs, 0, 10, 6},
		{"everything fits: still the oldest round", msgs, 0, 10_000, 2},
		{"steering after the newest round stays with it", steered, 0, 10, 6},
		{"an earlier checkpoint is not a round", checkpointed, 1, 230, 5},
		{"one round: nothing to summarize", round("x"), 0, 10, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := splitRounds(tc.msgs, tc.base, tc.keep, charTokens); got != tc.want {
				t.Errorf("splitRounds = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestTheCheckpointMessageCarriesTheWholeLedger(t *testing.T) {
	t.Parallel()
	changes := []db.FileChange{{Path: "a.txt", Op: "created"}, {Path: "b/c.md", Op: "modified"}}
	sources := []db.StepSource{{Kind: "file", Label: "notes.txt"}}
	got := checkpointMessage(3, "  Did things.  ", changes, sources)
	for _, want := range []string{"Rounds 1–3 of your work were summarized", "Summary of the work so far:\nDid things.\n",
		"- created a.txt\n- modified b/c.md\n", "Sources read so far:\n- file notes.txt\n", "Continue the task from here."} {
		if !strings.Contains(got, want) {
			t.Errorf("the checkpoint message lacks %q:\n%s", want, got)
		}
	}
	if got := checkpointMessage(1, "x", nil, nil); !strings.Contains(got, "Round 1 of your work") || !strings.Contains(got, "Files changed so far in this run: none.") {
		t.Errorf("a first checkpoint without changes:\n%s", got)
	}
}
