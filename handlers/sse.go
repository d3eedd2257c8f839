package handlers

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/a-h/templ"
)

// eventStream is the one writer of text/event-stream responses. It owns the
// framing: an event name, every line of the payload behind its own "data:"
// prefix (so a payload can never end an event early or forge one),
// heartbeat comments, and a flush after each event.
type eventStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf bytes.Buffer // reused for rendering payloads
	out bytes.Buffer // reused for framing
	// writeTimeout, when set, bounds each write: a reader that takes no
	// bytes for that long fails the write (the API's answers, whose model
	// waits on the reader, set it).
	writeTimeout time.Duration
}

// startEventStream sends the stream's headers. Streams have no write
// deadline: they are mounted outside the one ordinary routes get.
func startEventStream(w http.ResponseWriter) (*eventStream, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies must not buffer it
	w.WriteHeader(http.StatusOK)
	s := &eventStream{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.SetWriteDeadline(noDeadline)
	return s, s.rc.Flush()
}

// send writes one event; an empty name writes an unnamed one.
func (s *eventStream) send(event, data string) error {
	s.out.Reset()
	if event != "" {
		s.out.WriteString("event: ")
		s.out.WriteString(event)
		s.out.WriteByte('\n')
	}
	data = strings.ReplaceAll(data, "\r\n", "\n")
	data = strings.ReplaceAll(data, "\r", "\n")
	for {
		line, rest, more := strings.Cut(data, "\n")
		s.out.WriteString("data: ")
		s.out.WriteString(line)
		s.out.WriteByte('\n')
		if !more {
			break
		}
		data = rest
	}
	s.out.WriteByte('\n')
	return s.write(s.out.Bytes())
}

// sendComponent renders c and sends it as one event.
func (s *eventStream) sendComponent(ctx context.Context, event string, c templ.Component) error {
	s.buf.Reset()
	if err := c.Render(ctx, &s.buf); err != nil {
		return err
	}
	return s.send(event, s.buf.String())
}

// comment keeps the connection alive through proxies; browsers ignore it.
func (s *eventStream) comment() error {
	return s.write([]byte(": keep-alive\n\n"))
}

// write writes and flushes b, within writeTimeout when one is set.
func (s *eventStream) write(b []byte) error {
	if s.writeTimeout > 0 {
		if err := s.rc.SetWriteDeadline(time.Now().Add(s.writeTimeout)); err != nil {
			return err
		}
	}
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// sendData writes one unnamed event: "data: " and the payload, every line
// prefixed as in send. OpenAI's streams (the API's chat completions) are
// such events, JSON on one line each, then "data: [DONE]".
func (s *eventStream) sendData(data string) error {
	return s.send("", data)
}
