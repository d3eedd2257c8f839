package chat

import (
	"encoding/json"
	"reflect"
	"testing"
)

var fastLines = []string{
	// Ollama's own streamed lines (key order of api.ChatResponse).
	`{"model":"llama3.2","created_at":"2026-12-02T13:00:00.123456789Z","message":{"role":"assistant","content":"Hello"},"done":false}`,
	`{"model":"qwen3","created_at":"2026-12-02T13:00:00Z","message":{"role":"assistant","content":"","thinking":"Let me think"},"done":false}`,
	`{"model":"m","created_at":"2026-12-02T13:00:00+01:00","message":{"role":"ASSISTANT","content":"é 日本 🙂"},"done":false}`,
	`{"done":false,"message":{"content":"x","role":"assistant"},"created_at":"2026-12-02T13:00:00Z","model":"m"}`,
	` { "model" : "m" , "message" : { "role" : "assistant" , "content" : "spaced" } , "done" : true , "done_reason" : "stop" } `,
	`{"model":"m","message":{"role":"assistant","content":"a"},"message":{"role":"assistant","content":"b"},"done":false}`,
	`{}`,
	`{"message":{}}`,
}

// Lines the fast path must leave to encoding/json.
var slowLines = []string{
	`{"model":"m","created_at":"2026-12-02T13:00:00Z","message":{"role":"assistant","content":"line\n"},"done":false}`,
	`{"model":"m","message":{"role":"assistant","content":"\u003cb\u003e"},"done":false}`,
	`{"model":"m","message":{"role":"assistant","content":"x"},"done":true,"done_reason":"stop","total_duration":123,"eval_count":4}`,
	`{"Model":"m"}`,
	`{"error":"model not found"}`,
	`{"model":"m","message":{"role":"assistant","content":"x","tool_calls":[{"function":{"name":"f","arguments":{}}}]},"done":false}`,
	`{"model":"m","created_at":"yesterday","done":false}`,
	`{"model":"m","done":null}`,
	`{"model":"m"} trailing`,
	`{"model":"m",}`,
	"{\"model\":\"\xff\xfe\"}",
	`{"model":"m","message":null}`,
	`[]`,
	``,
}

// The fast path takes the common lines and gives exactly what
// json.Unmarshal gives; it refuses the rest.
func TestTheFastLineDecoderAgreesWithEncodingJSON(t *testing.T) {
	for _, line := range fastLines {
		var fast chatLine
		if !fastChatLine([]byte(line), &fast) {
			t.Errorf("the fast path refused a common line: %s", line)
			continue
		}
		var want chatLine
		if err := json.Unmarshal([]byte(line), &want); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", line, err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Errorf("line %s\nfast %+v\njson %+v", line, fast, want)
		}
	}
	for _, line := range slowLines {
		var fast chatLine
		if fastChatLine([]byte(line), &fast) {
			t.Errorf("the fast path took a line it cannot decode exactly: %q", line)
		}
	}
}

func FuzzFastChatLine(f *testing.F) {
	for _, l := range append(fastLines, slowLines...) {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var fast chatLine
		if !fastChatLine(line, &fast) {
			return
		}
		var want chatLine
		if err := json.Unmarshal(line, &want); err != nil {
			t.Fatalf("fast path took %q, which json.Unmarshal refuses: %v", line, err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("line %q\nfast %+v\njson %+v", line, fast, want)
		}
	})
}
