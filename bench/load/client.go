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
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"weft/views"
)

// newTransport is shared by every simulated person: enough connections for
// thousands of open event streams plus the posts beside them.
func newTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        8192,
		MaxIdleConnsPerHost: 8192,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // count the bytes Weft sends
	}
}

// person is one signed-in user with a cookie jar, like one browser.
type person struct {
	base  string
	email string
	hc    *http.Client
	wsID  string
}

const benchPassword = "bench-password-0123"

func newPerson(base, email string, tr *http.Transport) *person {
	jar, _ := cookiejar.New(nil)
	return &person{base: base, email: email, hc: &http.Client{
		Jar:           jar,
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// do sends one request and reads the whole answer.
func (p *person) do(ctx context.Context, method, path string, form url.Values, htmx bool) (*http.Response, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, p.base+path, body)
	if err != nil {
		return nil, "", err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if htmx {
		req.Header.Set("HX-Request", "true")
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp, string(b), nil
}

var (
	wsRe    = regexp.MustCompile(`name="workspace_id" value="(\d+)"`)
	runRe   = regexp.MustCompile(`data-run-id="(\d+)"`)
	threadR = regexp.MustCompile(`^/t/(\d+)`)
)

// register creates the account and finds the default workspace's id in the
// home page's composer.
func (p *person) register(ctx context.Context) error {
	resp, body, err := p.do(ctx, http.MethodPost, "/register", url.Values{"email": {p.email}, "password": {benchPassword}}, false)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusSeeOther {
		return fmt.Errorf("register %s: status %d: %.200s", p.email, resp.StatusCode, body)
	}
	resp, body, err = p.do(ctx, http.MethodGet, "/", nil, false)
	if err != nil {
		return err
	}
	m := wsRe.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		return fmt.Errorf("home page of %s: status %d, no workspace_id input", p.email, resp.StatusCode)
	}
	p.wsID = m[1]
	return nil
}

// newThread posts the first message of a new thread like the composer
// does, follows the 303 to the thread page (as a browser does) and returns
// the thread and the run shown in the page's placeholder (0 when the answer
// was already finished when the page rendered).
func (p *person) newThread(ctx context.Context, content string) (thread, run int64, err error) {
	resp, body, err := p.do(ctx, http.MethodPost, "/t", url.Values{"workspace_id": {p.wsID}, "content": {content}}, false)
	if err != nil {
		return 0, 0, err
	}
	loc := resp.Header.Get("Location")
	m := threadR.FindStringSubmatch(loc)
	if resp.StatusCode != http.StatusSeeOther || m == nil {
		return 0, 0, fmt.Errorf("POST /t: status %d, location %q: %.200s", resp.StatusCode, loc, body)
	}
	thread, _ = strconv.ParseInt(m[1], 10, 64)
	page, _, _ := strings.Cut(loc, "#")
	resp, body, err = p.do(ctx, http.MethodGet, page, nil, false)
	if err != nil {
		return thread, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return thread, 0, fmt.Errorf("GET %s: status %d", page, resp.StatusCode)
	}
	if m := runRe.FindStringSubmatch(body); m != nil {
		run, _ = strconv.ParseInt(m[1], 10, 64)
		return thread, run, nil
	}
	return thread, 0, &finishedError{thread: thread, page: body}
}

// finishedError: the thread page showed no running answer. Callers that
// need a live run report it; it says how the answer ended.
type finishedError struct {
	thread int64
	page   string
}

var (
	statusRe = regexp.MustCompile(`data-role="assistant" data-status="([a-z]+)"`)
	alertRe  = regexp.MustCompile(`role="alert">([^<]*)<`)
)

func (e *finishedError) Error() string {
	status, msg := "?", ""
	if m := statusRe.FindStringSubmatch(e.page); m != nil {
		status = m[1]
	}
	if m := alertRe.FindStringSubmatch(e.page); m != nil {
		msg = ": " + m[1]
	}
	return fmt.Sprintf("thread %d: the page shows no running answer (answer status %s%s)", e.thread, status, msg)
}

// appendMessage posts a message into a thread as htmx does; the answer
// placeholder in the returned fragments names the run.
func (p *person) appendMessage(ctx context.Context, thread int64, content string) (int64, error) {
	path := fmt.Sprintf("/t/%d/messages", thread)
	resp, body, err := p.do(ctx, http.MethodPost, path, url.Values{"content": {content}}, true)
	if err != nil {
		return 0, err
	}
	m := runRe.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		return 0, fmt.Errorf("POST %s: status %d, no data-run-id: %.200s", path, resp.StatusCode, body)
	}
	return strconv.ParseInt(m[1], 10, 64)
}

// cancel presses Stop.
func (p *person) cancel(ctx context.Context, run int64) error {
	resp, _, err := p.do(ctx, http.MethodPost, fmt.Sprintf("/runs/%d/cancel", run), url.Values{}, true)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("cancel run %d: status %d", run, resp.StatusCode)
	}
	return nil
}

// event is one server-sent event as it arrived.
type event struct {
	name string
	data string
	at   time.Time
}

var errNoDone = errors.New("stream ended without a done event")

// stream reads GET /runs/{id}/events until the done event (returns nil),
// the end of the response (errNoDone) or an error. onEvent sees every event
// as soon as its closing blank line is read. It returns the body bytes
// received.
func (p *person) stream(ctx context.Context, run int64, onEvent func(event)) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/runs/%d/events", p.base, run), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("events of run %d: status %d", run, resp.StatusCode)
	}
	cr := &countingReader{r: resp.Body}
	br := bufio.NewReaderSize(cr, 64<<10)
	var name string
	var data []byte
	var long []byte // a line longer than the buffer, in pieces
	hasData := false
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return cr.n, errNoDone
			}
			return cr.n, err
		}
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		switch {
		case len(line) == 0:
			if name == "" && !hasData {
				continue
			}
			ev := event{name: name, data: string(data), at: time.Now()}
			onEvent(ev)
			if ev.name == views.EventDone {
				return cr.n, nil
			}
			name, hasData = "", false
			data = data[:0]
		case line[0] == ':':
			// heartbeat comment
		case bytes.HasPrefix(line, []byte("event:")):
			name = string(bytes.TrimSpace(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			if hasData {
				data = append(data, '\n')
			}
			v := line[len("data:"):]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			data = append(data, v...)
			hasData = true
		}
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// stamps calls fn with every "t=<19 digits>" time in s, in order, and
// returns the r= time if s has one (0 otherwise).
func stamps(s string, fn func(int64)) (recv int64) {
	for {
		i := strings.Index(s, "=")
		if i < 0 {
			return recv
		}
		if i >= 1 && i+20 <= len(s) && (s[i-1] == 't' || s[i-1] == 'r') {
			if v, ok := digits19(s[i+1 : i+20]); ok {
				if s[i-1] == 't' {
					fn(v)
				} else {
					recv = v
				}
				s = s[i+20:]
				continue
			}
		}
		s = s[i+1:]
	}
}

func digits19(s string) (int64, bool) {
	var v int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}
