package chat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/envconfig"
	"github.com/ollama/ollama/version"
)

// OllamaClient is the official client (github.com/ollama/ollama/api) with
// its Chat replaced by a reader of our own. The official client's stream
// allocates an 8 MB scan buffer on every call, streamed or not, which at
// hundreds of concurrent answers is most of the heap and, zeroed, most of
// the CPU (docs/PERFORMANCE.md, section 2). This Chat reads the same NDJSON
// through a small pooled buffer that grows only for a long line, decodes
// into the same api types and returns the same errors; every other method
// (Embed, List, Show, …) is the official client's.
type OllamaClient struct {
	*api.Client
	base    *url.URL
	http    *http.Client
	maxLine int // bytes of one response line, its "\n" included
}

// NewOllamaClient returns the client for the server at base, with a
// transport fit for many long streams: a connect timeout, enough idle
// connections for concurrent runs, and no overall timeout (an answer may
// take minutes; Stop cancels it through its context).
func NewOllamaClient(base *url.URL) *OllamaClient {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	hc := &http.Client{Transport: tr}
	return &OllamaClient{Client: api.NewClient(base, hc), base: base, http: hc, maxLine: MaxResponseLine}
}

// MaxResponseLine is the longest /api/chat response line read, its "\n"
// included: the official client's limit (8 * format.MegaByte). Past it the
// official client stops reading and returns nil, as if the answer had
// ended; this one returns ErrResponseLineTooLong.
const MaxResponseLine = 8_000_000

// ErrResponseLineTooLong is returned by OllamaClient.Chat for a response
// line longer than MaxResponseLine.
var ErrResponseLineTooLong = fmt.Errorf("the model server sent a response line longer than %d bytes", MaxResponseLine)

// readers holds the line buffers of finished chats. A streamed line is a
// few hundred bytes; the final line of a long non-streamed answer or a big
// tool call may be more, and is assembled in a buffer of its own.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// userAgent is the official client's.
var userAgent = fmt.Sprintf("ollama/%s (%s %s) Go/%s", version.Version, runtime.GOARCH, runtime.GOOS, runtime.Version())

// Chat posts req to /api/chat and calls fn with every response line, as
// api.Client.Chat does (github.com/ollama/ollama v0.17.4, Client.stream):
// the same request and headers; the first line of an error status becomes
// an api.StatusError (api.AuthorizationError for 401); an {"error": …}
// line becomes errors.New of its text; lines are read to the end of the
// body (not only to done), and a read error (the connection cut, ctx
// cancelled) ends the lines like the end of the body, so Chat returns nil
// then: callers tell a complete answer by its done line. The one
// difference: a line longer than MaxResponseLine is ErrResponseLineTooLong,
// not a silent end. Signed requests (OLLAMA_AUTH, ollama.com) go through
// the official client, which owns the signing.
func (c *OllamaClient) Chat(ctx context.Context, req *api.ChatRequest, fn api.ChatResponseFunc) error {
	if envconfig.UseAuth() || c.base.Hostname() == "ollama.com" {
		return c.Client.Chat(ctx, req, fn)
	}
	var l chatLine // one for all lines: it escapes to the heap
	return c.stream(ctx, "/api/chat", req, func(line []byte) error {
		// One decode for the error probe and the response; a line it
		// refuses takes the official client's two steps, for the same
		// error. Zeroed first, so nothing of the last line is reused.
		l = chatLine{}
		if !fastChatLine(line, &l) {
			l = chatLine{}
			if json.Unmarshal(line, &l) != nil {
				return officialLine(line, fn)
			}
		}
		if l.Error != "" {
			return errors.New(l.Error)
		}
		return fn(l.ChatResponse)
	})
}

// stream posts req as JSON to path and calls each with every line of the
// NDJSON answer, read through a pooled line buffer (not the official
// client's 8 MB one). The end of the stream, a cut stream and a cancelled
// ctx return nil, as the official client does (callers tell a complete
// answer by its last line); a line longer than the limit is
// ErrResponseLineTooLong; an error status is the official client's error,
// from its first line.
func (c *OllamaClient) stream(ctx context.Context, path string, req any, each func(line []byte) error) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	request, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.JoinPath(path).String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	request.Header.Set("Content-Type", "application/json")
	request.Header.Set("Accept", "application/x-ndjson")
	request.Header.Set("User-Agent", userAgent)
	response, err := c.http.Do(request)
	if err != nil {
		return err
	}
	defer response.Body.Close()

	br := readers.Get().(*bufio.Reader)
	br.Reset(response.Body)
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
	lines := lineReader{r: br, max: c.maxLine}
	for {
		line, err := lines.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if response.StatusCode >= http.StatusBadRequest {
			return statusError(response, line)
		}
		if err := each(line); err != nil {
			return err
		}
	}
}

// chatLine is a response line with the error fields the official client
// probes every line for. ChatResponse has no field of those names and no
// UnmarshalJSON of its own, so a line decodes into it as into its parts.
type chatLine struct {
	api.ChatResponse
	Error     string `json:"error,omitempty"`
	SigninURL string `json:"signin_url,omitempty"`
}

// errorProbe is the official client's.
type errorProbe struct {
	Error     string `json:"error,omitempty"`
	SigninURL string `json:"signin_url,omitempty"`
}

// statusError is what the official client returns for the first line of
// an error status.
func statusError(response *http.Response, line []byte) error {
	var e errorProbe
	if err := json.Unmarshal(line, &e); err != nil {
		return api.StatusError{StatusCode: response.StatusCode, Status: response.Status, ErrorMessage: string(line)}
	}
	if response.StatusCode == http.StatusUnauthorized {
		return api.AuthorizationError{StatusCode: response.StatusCode, Status: response.Status, SigninURL: e.SigninURL}
	}
	return api.StatusError{StatusCode: response.StatusCode, Status: response.Status, ErrorMessage: e.Error}
}

// officialLine handles a successful status's line as the official client
// does, step by step: the error probe, then the response.
func officialLine(line []byte, fn api.ChatResponseFunc) error {
	var e errorProbe
	if err := json.Unmarshal(line, &e); err != nil {
		return errors.New(string(line))
	}
	if e.Error != "" {
		return errors.New(e.Error)
	}
	var resp api.ChatResponse
	if err := json.Unmarshal(line, &resp); err != nil {
		return err
	}
	return fn(resp)
}

// lineReader splits a body into lines as bufio.ScanLines does (a trailing
// "\r" dropped, a last line without "\n" kept, empty lines kept), through r
// and a buffer of its own for a line longer than r's.
type lineReader struct {
	r    *bufio.Reader
	long []byte
	max  int
	end  bool
}

// next returns the next line, valid until the next call, or io.EOF. A read
// error ends the lines like the end of the body, after the part of a line
// read before it (bufio.Scanner gives that part as a last token, and the
// official client drops the scanner's error).
func (l *lineReader) next() ([]byte, error) {
	if l.end {
		return nil, io.EOF
	}
	l.long = l.long[:0]
	for {
		frag, err := l.r.ReadSlice('\n')
		if len(l.long)+len(frag) > l.max {
			return nil, ErrResponseLineTooLong
		}
		if err == bufio.ErrBufferFull {
			l.long = l.grow(frag)
			continue
		}
		line := frag
		if len(l.long) > 0 {
			l.long = l.grow(frag)
			line = l.long
		}
		if err != nil {
			l.end = true
			if len(line) == 0 {
				return nil, io.EOF
			}
			return dropCR(line), nil
		}
		return dropCR(line[:len(line)-1]), nil
	}
}

// grow appends frag to the long line, doubling its buffer up to max.
func (l *lineReader) grow(frag []byte) []byte {
	need := len(l.long) + len(frag)
	if need > cap(l.long) {
		c := min(max(2*cap(l.long), need, 64<<10), l.max)
		b := make([]byte, len(l.long), c)
		copy(b, l.long)
		l.long = b
	}
	return append(l.long, frag...)
}

func dropCR(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return b[:len(b)-1]
	}
	return b
}

// Pull posts req to /api/pull and calls fn with every progress line, as
// api.Client.Pull does (the same request, errors and end of lines as
// Chat above), through the pooled line buffer instead of the official
// client's 8 MB one. Like it, Pull returns nil when the stream is cut or
// ctx cancelled: a pull succeeded only when a "success" line arrived.
func (c *OllamaClient) Pull(ctx context.Context, req *api.PullRequest, fn api.PullProgressFunc) error {
	if envconfig.UseAuth() || c.base.Hostname() == "ollama.com" {
		return c.Client.Pull(ctx, req, fn)
	}
	return c.stream(ctx, "/api/pull", req, func(line []byte) error {
		var e errorProbe
		if err := json.Unmarshal(line, &e); err != nil {
			return errors.New(string(line))
		}
		if e.Error != "" {
			return errors.New(e.Error)
		}
		var p api.ProgressResponse
		if err := json.Unmarshal(line, &p); err != nil {
			return err
		}
		return fn(p)
	})
}

// Unload asks the server to take a model out of memory now (an empty
// /api/generate with keep_alive 0, as `ollama stop` does).
func (c *OllamaClient) Unload(ctx context.Context, model string) error {
	return c.Client.Generate(ctx, &api.GenerateRequest{Model: model, KeepAlive: &api.Duration{}},
		func(api.GenerateResponse) error { return nil })
}
