// Lifecycle hooks: the events of a run delivered to HTTP receivers and
// commands. The administrator's hooks come from a file (WEFT_HOOKS_CONFIG:
// URLs and commands); a workspace's owner adds HTTP hooks of their own,
// delivered through webfetch's address policy. Only tool_execution_start is
// waited for (a policy hook may deny the call); every other event goes to
// an outbox worked by a job with retries, so the run never waits on a
// receiver.

package agent

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"weft/internal/webfetch"
)

// Lifecycle events, in the order a run emits them.
const (
	EventAgentStart          = "agent_start"
	EventTurnStart           = "turn_start"
	EventMessageStart        = "message_start"
	EventMessageUpdate       = "message_update"
	EventMessageEnd          = "message_end"
	EventToolExecutionStart  = "tool_execution_start"
	EventToolExecutionUpdate = "tool_execution_update"
	EventToolExecutionEnd    = "tool_execution_end"
	EventTurnEnd             = "turn_end"
	EventAgentEnd            = "agent_end"
)

// HookEvents lists every lifecycle event.
var HookEvents = []string{EventAgentStart, EventAgentEnd, EventTurnStart, EventTurnEnd, EventMessageStart,
	EventMessageUpdate, EventMessageEnd, EventToolExecutionStart, EventToolExecutionUpdate, EventToolExecutionEnd}

// ValidHookEvent reports whether e is a lifecycle event or "*".
func ValidHookEvent(e string) bool { return e == "*" || slices.Contains(HookEvents, e) }

// Hook is one of the administrator's hooks, as the hooks file has it:
// {"event": EVENT, "url": URL} or {"event": EVENT, "command": [ARGV…]}, with
// an optional "secret" (signs HTTP deliveries) and "timeout" (seconds).
type Hook struct {
	Event   string   `json:"event"`
	URL     string   `json:"url,omitempty"`
	Command []string `json:"command,omitempty"`
	Secret  string   `json:"secret,omitempty"`
	Timeout float64  `json:"timeout,omitempty"`
}

// HooksConfig configures lifecycle hooks. Zero fields take the defaults.
type HooksConfig struct {
	// Hooks are the administrator's (ParseHooksFile of WEFT_HOOKS_CONFIG).
	Hooks []Hook
	// Allow lists what workspaces' hooks may reach although it is not the
	// public internet (WEFT_HOOKS_ALLOW): addresses, CIDR ranges or host
	// names. The administrator's own hooks reach any address.
	Allow []string
	// Timeout bounds one delivery when the hook sets none (default 10 s).
	Timeout time.Duration
	// RetryBackoff is the wait before the first retry of a failed
	// delivery (default 2 s); it doubles, up to 5 minutes.
	RetryBackoff time.Duration
	// Attempts is how often a delivery is tried before it is given up
	// (default 10).
	Attempts int
}

func (c HooksConfig) withDefaults() HooksConfig {
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 2 * time.Second
	}
	if c.Attempts <= 0 {
		c.Attempts = 10
	}
	return c
}

// ParseHooksFile reads the administrator's hooks file.
func ParseHooksFile(path string) ([]Hook, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("hooks file: %w", err)
	}
	hooks, err := ParseHooks(data)
	if err != nil {
		return nil, fmt.Errorf("hooks file %s: %w", path, err)
	}
	return hooks, nil
}

// ParseHooks parses and checks a hooks file's content.
func ParseHooks(data []byte) ([]Hook, error) {
	var f struct {
		Hooks []Hook `json:"hooks"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a hooks file ({\"hooks\": [...]}): %w", err)
	}
	for i, h := range f.Hooks {
		switch {
		case !ValidHookEvent(h.Event):
			return nil, fmt.Errorf("hook %d: unknown event %q (one of %s, or \"*\")", i+1, h.Event, strings.Join(HookEvents, ", "))
		case (h.URL == "") == (len(h.Command) == 0):
			return nil, fmt.Errorf("hook %d: give either \"url\" or \"command\"", i+1)
		case h.Timeout < 0 || h.Timeout > maxHookTimeout.Seconds():
			return nil, fmt.Errorf("hook %d: timeout must be from 0 to 300 seconds", i+1)
		case len(h.Command) > 0 && h.Command[0] == "":
			return nil, fmt.Errorf("hook %d: the command is empty", i+1)
		case h.URL != "":
			if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, fmt.Errorf("hook %d: the url must be an http or https URL", i+1)
			}
		}
	}
	return f.Hooks, nil
}

// target is one receiver of events: an administrator's hook or a
// workspace's.
type target struct {
	key     string // hook_key of its deliveries
	event   string // the event it takes, or "*"
	url     string
	command []string
	secret  string
	timeout time.Duration
	// wsHook is the workspace hook's id (0: the administrator's); its
	// deliveries go through the address policy.
	wsHook int64
	ws     int64 // the workspace hook's workspace
}

func (t target) takes(event string) bool { return t.event == "*" || t.event == event }

// label is how the trace names the hook.
func (t target) label() string {
	if t.url != "" {
		// Only the scheme and host: webhook URLs often carry their
		// credential in the path (Slack's, Discord's) or the query, and
		// users read the trace and /tools/hooks.
		if u, err := url.Parse(t.url); err == nil && u.Host != "" {
			return "POST " + u.Scheme + "://" + u.Host
		}
		return "POST"
	}
	// Only the program's name: its arguments may hold the
	// administrator's secrets, and users read the trace.
	return "command " + filepath.Base(t.command[0])
}

func adminTarget(h Hook, def time.Duration) target {
	t := target{event: h.Event, url: h.URL, command: h.Command, secret: h.Secret, timeout: def}
	if h.Timeout > 0 {
		t.timeout = time.Duration(h.Timeout * float64(time.Second))
	}
	if h.URL != "" {
		t.key = "url:" + h.URL
	} else {
		b, _ := json.Marshal(h.Command)
		t.key = "command:" + string(b)
	}
	return t
}

// maxHookTimeout is the longest timeout a hook may set.
const maxHookTimeout = 300 * time.Second

// maxAnswer caps what is read of a hook's answer.
const maxAnswer = 64 << 10

// hookAnswer is what a tool_execution_start hook may answer.
type hookAnswer struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
}

// denial reads an answer: a deny, with its reason, or nothing.
func denial(answer []byte) (bool, string) {
	var a hookAnswer
	if json.Unmarshal(bytes.TrimSpace(answer), &a) != nil || !strings.EqualFold(a.Decision, "deny") {
		return false, ""
	}
	reason := strings.TrimSpace(a.Reason)
	if len(reason) > 1000 {
		reason = cutText(reason, 1000)
	}
	if reason == "" {
		reason = "A policy hook denied this call."
	}
	return true, reason
}

// Sign is the X-Weft-Signature of a delivery: "sha256=" and the hex
// HMAC-SHA256 of the exact body with the hook's secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// sender delivers one event to one target and returns its answer.
type sender struct {
	cfg   HooksConfig
	ws    webfetch.Client // workspaces' hooks: the address policy and the administrator's exceptions
	open  webfetch.Client // hosts the administrator named in Allow
	hosts map[string]bool
	admin *http.Client // the administrator's own URLs
}

func newSender(cfg HooksConfig) *sender {
	s := &sender{cfg: cfg, hosts: map[string]bool{}}
	var prefixes []netip.Prefix
	for _, a := range cfg.Allow {
		a = strings.TrimSpace(a)
		if p, err := netip.ParsePrefix(a); err == nil {
			prefixes = append(prefixes, p.Masked())
		} else if ip, err := netip.ParseAddr(a); err == nil {
			prefixes = append(prefixes, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
		} else if a != "" {
			s.hosts[strings.ToLower(a)] = true
		}
	}
	s.ws = webfetch.Client{MaxBytes: maxAnswer}.AllowPrefixes(prefixes...)
	s.open = webfetch.Client{MaxBytes: maxAnswer}.AllowPrefixes(netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"))
	s.admin = &http.Client{
		Transport:     &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s
}

// send delivers body (the event's payload) to t within its timeout.
func (s *sender) send(ctx context.Context, t target, event, id string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var answer []byte
	var err error
	if t.url != "" {
		answer, err = s.post(ctx, t, event, id, body)
	} else {
		answer, err = s.run(ctx, t, event, id, body)
	}
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("no answer within %s", t.timeout)
	}
	return answer, err
}

func (s *sender) post(ctx context.Context, t target, event, id string, body []byte) ([]byte, error) {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "Weft hooks")
	h.Set("X-Weft-Event", event)
	h.Set("X-Weft-Delivery", id)
	if t.secret != "" {
		h.Set("X-Weft-Signature", Sign(t.secret, body))
	}
	if t.wsHook != 0 {
		c := s.ws
		if u, err := url.Parse(t.url); err == nil && s.hosts[strings.ToLower(u.Hostname())] {
			c = s.open
		}
		c.Timeout = t.timeout
		return c.Post(ctx, t.url, h, body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return nil, errors.New("the URL cannot be used")
	}
	req.Header = h
	resp, err := s.admin.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%s could not be reached", req.URL.Host)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("the hook answered %s", resp.Status)
	}
	return answer, nil
}

// run runs a command hook with the payload on its stdin and returns its
// stdout; a non-zero exit is a failure. Its environment is PATH, HOME and
// LANG of the server's, with WEFT_HOOK_EVENT and WEFT_HOOK_ID. It runs in
// a process group of its own, killed when the time is up and as soon as
// the command exits: a child it left behind (`notify … &`) neither
// outlives it nor holds its answer open.
func (s *sender) run(ctx context.Context, t target, event, id string, body []byte) ([]byte, error) {
	cmd := exec.Command(t.command[0], t.command[1:]...)
	env := []string{"WEFT_HOOK_EVENT=" + event, "WEFT_HOOK_ID=" + id}
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The pipes are the server's own (not exec's copying goroutines, which
	// Wait waits for): Wait returns when the command exits, whoever else
	// holds them.
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (*os.File, *os.File, error) {
		r, w, err := os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll()
		return nil, fmt.Errorf("the command could not be started: %w", err)
	}
	defer closeAll()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("the command could not be started: %w", err)
	}
	_, _, _ = inR.Close(), outW.Close(), errW.Close()
	pgid := cmd.Process.Pid
	go func() {
		_, _ = inW.Write(body) // fails (EPIPE) when the command exits without reading it all
		_ = inW.Close()
	}()
	var out, errOut capped
	out.max, errOut.max = maxAnswer, 2<<10
	var readers sync.WaitGroup
	readers.Go(func() { _, _ = io.Copy(&out, outR) })
	readers.Go(func() { _, _ = io.Copy(&errOut, errR) })
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var err error
	select {
	case err = <-waited:
	case <-ctx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		err = <-waited
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // what it left in its group
	read := make(chan struct{})
	go func() { readers.Wait(); close(read) }()
	linger := time.NewTimer(time.Second)
	defer linger.Stop()
	select {
	case <-read:
	case <-linger.C: // a child that left the group (setsid) still holds a pipe
	case <-ctx.Done():
	}
	_, _ = outR.Close(), errR.Close()
	<-read
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		// What the command wrote on stderr may hold the administrator's
		// paths or secrets: it goes to the log, the trace gets the status.
		if msg := cutText(strings.TrimSpace(errOut.String()), 500); msg != "" {
			slog.Warn("hooks: a command hook failed", "err", err, "stderr", msg)
		}
		return nil, fmt.Errorf("the command failed (%v); its output is in the server's log", err)
	}
	return out.Bytes(), nil
}

// capped is a buffer that keeps its first max bytes.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// CheckHookURL checks the URL of a workspace's hook when it is added: an
// http or https URL, with no user name or password, and not a private or
// local address the administrator did not allow (deliveries are checked
// again when they are dialled, after DNS).
func (a *Agent) CheckHookURL(raw string) error {
	u, err := webfetch.CheckURL(raw)
	if err != nil {
		return errors.New("Give an http:// or https:// URL with a host name and no user name or password.")
	}
	host := strings.ToLower(u.Hostname())
	if a.hooks.send.hosts[host] {
		return nil
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return errors.New("This URL is on this machine; hooks reach the public internet only, unless the administrator allows the address (WEFT_HOOKS_ALLOW).")
	}
	if ip, err := netip.ParseAddr(host); err == nil && a.hooks.send.ws.Refuses(ip) != "" {
		return errors.New("This address is on a private or local network; hooks reach the public internet only, unless the administrator allows the address (WEFT_HOOKS_ALLOW).")
	}
	return nil
}

// AdminHooks describes the administrator's hooks ("event → target").
func (a *Agent) AdminHooks() []string {
	var out []string
	for _, t := range a.hooks.admin {
		out = append(out, t.event+" → "+t.label())
	}
	return out
}
