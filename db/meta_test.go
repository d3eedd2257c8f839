package db_test

import (
	"encoding/json"
	"testing"

	"weft/db"
)

func TestMessageMetaKeepsTheStoredBytesAndSurvivesValuesOfTheWrongType(t *testing.T) {
	// Imported metadata may hold anything: keys Weft does not know, and
	// known keys of another type.
	stored := `{"route": "rag", "usage": {"prompt_tokens": "many", "output_tokens": 7}, "covers": 3, "through": 9, "x-origin": {"app": "other"}}`
	var m db.MessageMeta
	if err := json.Unmarshal([]byte(stored), &m); err != nil {
		t.Fatalf("a message whose metadata has a value of the wrong type cannot be read: %v", err)
	}
	if string(m.Raw) != stored {
		t.Errorf("the stored metadata is not kept as it was (exports copy it): %s", m.Raw)
	}
	if m.Route != db.RouteRAG || m.Usage.OutputTokens != 7 || m.Usage.PromptTokens != 0 {
		t.Errorf("decoded %+v, want route rag and 7 output tokens", m)
	}
	if m.Compaction == nil || m.Compaction.Covers != 3 || m.Evidence != nil {
		t.Errorf("compaction keys at the top level decode as %+v, evidence %+v", m.Compaction, m.Evidence)
	}
}

func TestUsageOfAnAnswerStoresItsTokenCountsEvenWhenZero(t *testing.T) {
	// A thread's usage counts the runs whose usage has output_tokens.
	counted, _ := json.Marshal(db.Usage{Counted: true, WallMS: 5})
	if string(counted) != `{"wall_ms":5,"prompt_tokens":0,"output_tokens":0}` {
		t.Errorf("counted usage = %s", counted)
	}
	failed, _ := json.Marshal(db.Usage{WallMS: 5, NumCtx: 2048})
	if string(failed) != `{"num_ctx":2048,"wall_ms":5}` {
		t.Errorf("usage of an answer the model never finished = %s", failed)
	}
}

func TestABuiltMessageMetaWritesOnlyTheKeysItSets(t *testing.T) {
	answer, _ := json.Marshal(db.MessageMeta{Route: db.RouteChat, Model: "tiny", Raw: json.RawMessage(`{"old": 1}`)})
	if string(answer) != `{"route":"chat","model":"tiny"}` {
		t.Errorf("new answer metadata = %s", answer)
	}
	agent, _ := json.Marshal(db.MessageMeta{Evidence: &db.Evidence{}})
	if string(agent) != `{"rounds":0}` {
		t.Errorf("agent evidence without rounds = %s, want the rounds stored", agent)
	}
	user, _ := json.Marshal(db.MessageMeta{})
	if string(user) != `{}` {
		t.Errorf("a user message's metadata = %s", user)
	}
}
