package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
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
func (s *eventStream) send(event, data string) error { return s.frame(event, -1, data) }

// sendWithID writes one event with an id (a number: it can carry no line
// break). A browser whose connection drops reconnects by itself and sends
// the last id it received back as the Last-Event-ID header.
func (s *eventStream) sendWithID(event string, id int64, data string) error {
	return s.frame(event, max(id, 0), data)
}

// frame writes one event: its name (empty: none), its id (negative: none)
// and every line of data.
func (s *eventStream) frame(event string, id int64, data string) error {
	s.out.Reset()
	if id >= 0 {
		s.out.WriteString("id: ")
		s.out.WriteString(strconv.FormatInt(id, 10))
		s.out.WriteByte('\n')
	}
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

// errStreamEnded is a muxStream's answer once it has ended: the browser
// left (a write failed) or its last event was sent.
var errStreamEnded = errors.New("event stream ended")

// muxStream lets several goroutines write one event stream (a room's: one
// per answer being written, and the room's own loop): each event is
// written whole, one at a time. After a failed write or end, every write
// fails with errStreamEnded.
type muxStream struct {
	mu    sync.Mutex
	es    *eventStream
	ended bool
}

func (m *muxStream) send(event, data string) error {
	return m.write(func() error { return m.es.send(event, data) })
}

func (m *muxStream) sendWithID(event string, id int64, data string) error {
	return m.write(func() error { return m.es.sendWithID(event, id, data) })
}

func (m *muxStream) comment() error { return m.write(m.es.comment) }

// end sends a last event; nothing is written after it.
func (m *muxStream) end(event, data string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ended {
		return errStreamEnded
	}
	m.ended = true
	if err := m.es.send(event, data); err != nil {
		return fmt.Errorf("%w: %w", errStreamEnded, err)
	}
	return nil
}

func (m *muxStream) write(fn func() error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ended {
		return errStreamEnded
	}
	if err := fn(); err != nil {
		m.ended = true
		return fmt.Errorf("%w: %w", errStreamEnded, err)
	}
	return nil
}
