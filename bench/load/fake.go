package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ollama/ollama/api"

	"weft/internal/fakeollama"
)

// placeholder digits that the fake (or the proxy) replaces with a time in Unix
// nanoseconds (19 digits until the year 2286).
const zeros19 = "0000000000000000000"

var (
	recvMark = []byte("r=" + zeros19) // time the model request arrived
	emitMark = []byte("t=" + zeros19) // time the chunk was written to Weft
)

// spec is what a bench message asks the fake to answer, written in the
// message text as "bench n=400 d=50ms stamp hang".
type spec struct {
	n     int           // content chunks (tokens)
	delay time.Duration // before each chunk, the first included
	stamp bool          // chunks carry emission stamps ("t=…"), the first also "r=…"
	hang  bool          // never finish: the run stays live until cancelled
}

func (s spec) message(tag string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bench %s n=%d d=%s", tag, s.n, s.delay)
	if s.stamp {
		b.WriteString(" stamp")
	}
	if s.hang {
		b.WriteString(" hang")
	}
	return b.String()
}

func parseSpec(msg string) (spec, bool) {
	f := strings.Fields(msg)
	if len(f) == 0 || f[0] != "bench" {
		return spec{}, false
	}
	var s spec
	for _, w := range f[1:] {
		k, v, _ := strings.Cut(w, "=")
		switch k {
		case "n":
			s.n, _ = strconv.Atoi(v)
		case "d":
			s.delay, _ = time.ParseDuration(v)
		case "stamp":
			s.stamp = true
		case "hang":
			s.hang = true
		}
	}
	return s, true
}

// word is the text of unstamped chunk i: short words like a model's tokens.
func word(i int) string { return "w" + strconv.Itoa(i%1000) + " " }

// answerBytes is the length of an unstamped answer of n chunks.
func answerBytes(n int) int {
	total := 0
	for i := range n {
		total += len(word(i))
	}
	return total
}

func (e *env) script(req *api.ChatRequest) fakeollama.Reply {
	if req.Stream != nil && !*req.Stream {
		e.titles.Add(1)
		return fakeollama.Reply{Chunks: []string{"Bench thread"}}
	}
	e.streams.Add(1)
	last := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			last = req.Messages[i].Content
			break
		}
	}
	s, ok := parseSpec(last)
	if !ok {
		return fakeollama.DefaultReply(req)
	}
	chunks := make([]string, s.n)
	for i := range chunks {
		switch {
		case s.stamp && i == 0:
			chunks[i] = string(recvMark) + " " + string(emitMark) + " "
		case s.stamp:
			chunks[i] = string(emitMark) + " "
		default:
			chunks[i] = word(i)
		}
	}
	return fakeollama.Reply{Chunks: chunks, Delay: s.delay, Hang: s.hang}
}

// stampProxy sits between Weft and the fake. It passes everything through
// and, in the fake's NDJSON lines, replaces the r= placeholder with the time
// the request arrived and each t= placeholder with the time the line is
// passed on: the moment the "model" emits the token, as Weft sees it. Both
// clocks are this process's, as are the client's.
type stampProxy struct {
	target string
	client *http.Client
	srv    *http.Server
	URL    string
}

func startProxy(target string) (*stampProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &stampProxy{target: target, client: &http.Client{Transport: &http.Transport{
		MaxIdleConns: 8192, MaxIdleConnsPerHost: 8192, IdleConnTimeout: 90 * time.Second,
		DisableCompression: true,
	}}}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	p.URL = "http://" + ln.Addr().String()
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *stampProxy) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
	_ = p.srv.Close()
	p.client.CloseIdleConnections()
}

func (p *stampProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	recv := time.Now().UnixNano()
	// Read the request first: handing r.Body itself to the transport races
	// with this handler's response (the server closes r.Body when the
	// response starts, the transport's body writer then fails and closes
	// the upstream connection mid-stream).
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := p.client.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length") // lines keep their length, but be safe
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			stampLine(line, recv)
			if _, werr := w.Write(line); werr != nil {
				return
			}
			if br.Buffered() == 0 {
				if rc.Flush() != nil {
					return
				}
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			_ = rc.Flush()
			return
		}
	}
}

func stampLine(line []byte, recv int64) {
	if i := bytes.Index(line, recvMark); i >= 0 {
		putNanos(line[i+2:i+2+19], recv)
	}
	rest := line
	var now int64
	for {
		i := bytes.Index(rest, emitMark)
		if i < 0 {
			return
		}
		if now == 0 {
			now = time.Now().UnixNano()
		}
		putNanos(rest[i+2:i+2+19], now)
		rest = rest[i+2+19:]
	}
}

func putNanos(dst []byte, v int64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte('0' + v%10)
		v /= 10
	}
}
