package handlers

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
)

// parseSSE parses a text/event-stream body as the HTML standard says a
// browser does: lines end at CRLF, LF or CR; an empty line dispatches the
// event; a line starting with ":" is a comment; "field: value" (one
// optional space after the colon); data lines join with "\n".
func parseSSE(body string) (events [][2]string, other []string) {
	name, data, has := "", []string{}, false
	for len(body) > 0 {
		i := strings.IndexAny(body, "\r\n")
		line := body
		if i < 0 {
			body = "" // an unterminated last line is dropped
			break
		}
		line = body[:i]
		if strings.HasPrefix(body[i:], "\r\n") {
			body = body[i+2:]
		} else {
			body = body[i+1:]
		}
		if line == "" {
			if has {
				events = append(events, [2]string{name, strings.Join(data, "\n")})
			}
			name, data, has = "", []string{}, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name, has = value, true
		case "data":
			data, has = append(data, value), true
		default:
			other = append(other, line)
		}
	}
	return events, other
}

// FuzzSSE: whatever the payloads, the stream parses back to exactly the
// events written, with exactly their data (line ends normalized to "\n"):
// no payload ends its event early, starts another, or sets another field
// (id: or retry: would change the browser's reconnection).
func FuzzSSE(f *testing.F) {
	f.Add("hello", "x\n\nevent: done\ndata: <b>")
	f.Fuzz(func(t *testing.T, a, b string) {
		rec := httptest.NewRecorder()
		es, err := startEventStream(rec)
		if err != nil {
			t.Fatal(err)
		}
		written := [][2]string{{"delta", a}, {"snapshot", b}, {"done", a + b}}
		for i, ev := range written {
			if err := es.send(ev[0], ev[1]); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				if err := es.comment(); err != nil {
					t.Fatal(err)
				}
			}
		}
		got, other := parseSSE(rec.Body.String())
		if len(other) > 0 {
			t.Fatalf("a payload set other fields: %q", other)
		}
		if len(got) != len(written) {
			t.Fatalf("wrote %d events, read back %d: %q", len(written), len(got), got)
		}
		norm := strings.NewReplacer("\r\n", "\n", "\r", "\n")
		for i := range written {
			if want := [2]string{written[i][0], norm.Replace(written[i][1])}; got[i] != want {
				t.Fatalf("event %d read back as %q, want %q", i, got[i], want)
			}
		}
		if !bytes.HasSuffix(rec.Body.Bytes(), []byte("\n\n")) {
			t.Fatalf("the stream does not end with a finished event")
		}
	})
}
