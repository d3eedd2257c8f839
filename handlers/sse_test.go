package handlers

import (
	"net/http/httptest"
	"testing"
)

func TestEventPayloadLinesEachGetTheirOwnDataPrefix(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"one line", "hello", "event: delta\ndata: hello\n\n"},
		{"newlines", "a\nb\n", "event: delta\ndata: a\ndata: b\ndata: \n\n"},
		{"carriage returns", "a\r\nb\rc", "event: delta\ndata: a\ndata: b\ndata: c\n\n"},
		{"forged event", "x\n\nevent: done\ndata: <b>", "event: delta\ndata: x\ndata: \ndata: event: done\ndata: data: <b>\n\n"},
		{"empty", "", "event: delta\ndata: \n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			es, err := startEventStream(rec)
			if err != nil {
				t.Fatal(err)
			}
			if err := es.send("delta", tc.data); err != nil {
				t.Fatal(err)
			}
			if got := rec.Body.String(); got != tc.want {
				t.Fatalf("framed %q as %q, want %q", tc.data, got, tc.want)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
				t.Fatalf("content type %q", ct)
			}
		})
	}
}
