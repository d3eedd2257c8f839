package chat_test

import (
	"strings"
	"testing"

	"weft/chat"
)

// A judge's reply is read defensively: JSON with or without words or a
// fence around it, "met" as a boolean or a string; anything else is not
// readable and not met. The reason is model text, cleaned and capped.
func TestGoalVerdictsAreReadDefensively(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in            string
		met, readable bool
		reason        string
	}{
		{`{"met": true, "reason": "done"}`, true, true, "done"},
		{`{"met": false, "reason": "the tests fail"}`, false, true, "the tests fail"},
		{"Sure.\n```json\n{\"met\": true, \"reason\": \"ok\"}\n```", true, true, "ok"},
		{`{"met": "true", "reason": "as a string"}`, true, true, "as a string"},
		{`{"met": "FALSE"}`, false, true, "no reason given."},
		{`{"met": true, "reason": 7}`, true, true, "no reason given."},
		{`{"met": "maybe", "reason": "x"}`, false, false, ""},
		{`{"reason": "no verdict"}`, false, false, ""},
		{`{"met": 1}`, false, false, ""},
		{`yes, it is met`, false, false, ""},
		{`{"met": true`, false, false, ""},
		{``, false, false, ""},
		{"{\"met\": false, \"reason\": \"line\\none\\u202e\"}", false, true, "line one"},
	} {
		met, reason, readable := chat.ParseGoalVerdict(c.in)
		if met != c.met || readable != c.readable || reason != c.reason {
			t.Errorf("ParseGoalVerdict(%q) = %v %q %v, want %v %q %v", c.in, met, reason, readable, c.met, c.reason, c.readable)
		}
	}
	_, reason, _ := chat.ParseGoalVerdict(`{"met": false, "reason": "` + strings.Repeat("long ", 200) + `"}`)
	if n := len([]rune(reason)); n > 301 {
		t.Errorf("a long reason is %d runes", n)
	}
}
