package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft/agent"
)

// Limits of what one server may offer: it cannot flood the model's tool
// declarations, the system message or the settings table.
const (
	maxTools       = 128       // tools listed
	maxGone        = 32        // tools listed earlier and no longer, kept with that reason
	maxDescRunes   = 2000      // a tool's description
	maxSchemaBytes = 16 << 10  // a tool's input schema
	maxDeclBytes   = 256 << 10 // all of a server's names, descriptions and schemas
	maxSkipped     = 20        // tools left out, named on /admin
)

// toolName is what a server's tool may be called: the MCP specification's
// characters, at most 64, starting with a letter or digit. The name goes
// into the system message, form fields and Ollama's declarations, so a
// server cannot write text there through it; and no tool of server "a"
// ("_x") can be named like one of server "a_" ("x").
var toolName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// server is one configured server: its connection, and what Weft knows of
// its tools. Its state is guarded by the manager's mu.
type server struct {
	m    *Manager
	name string
	cfg  ServerConfig

	state   string
	since   time.Time
	lastErr string // for the administrator
	reason  string // for everyone: short, without addresses
	sess    *sdk.ClientSession
	known   []knownTool
	skipped []string // tools of the last list left out, and why (for /admin)

	changed chan struct{} // the server said its tool list changed
	broken  chan struct{} // a call failed as if the connection broke

	progMu   sync.Mutex
	progress map[string]func(string) // by progress token
	progSeq  int
}

func newServer(m *Manager, name string, cfg ServerConfig) *server {
	return &server{m: m, name: name, cfg: cfg, state: StateConnecting, since: time.Now(),
		changed: make(chan struct{}, 1), broken: make(chan struct{}, 1), progress: map[string]func(string){}}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// loop connects, serves and reconnects with backoff until ctx ends. Only
// a connection that lasted RetryMax resets the backoff: a server that fails
// right after each connection (it crashes at its first check) is not
// started again every second.
func (s *server) loop(ctx context.Context) {
	delay := s.m.cfg.Retry
	for {
		began := time.Now()
		connected, err := s.session(ctx)
		if ctx.Err() != nil {
			s.set(StateDown, nil, errors.New("stopped"))
			return
		}
		if connected && time.Since(began) >= s.m.cfg.RetryMax {
			delay = s.m.cfg.Retry
		}
		s.set(StateDown, nil, err)
		slog.Warn("mcp: server unreachable", "server", s.name, "err", s.cfg.redact(fmt.Sprint(err)), "retry_in", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			s.set(StateDown, nil, errors.New("stopped"))
			return
		case <-t.C:
		}
		delay = min(2*delay, s.m.cfg.RetryMax)
		s.set(StateConnecting, nil, nil)
	}
}

// session is one connection: connect, list the tools, then watch until
// it breaks. connected tells whether it got as far as listing the tools.
func (s *server) session(ctx context.Context) (connected bool, err error) {
	client := sdk.NewClient(&sdk.Implementation{Name: "weft", Version: "1"}, &sdk.ClientOptions{
		Capabilities:           &sdk.ClientCapabilities{}, // no roots: Weft lends no folders
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { signal(s.changed) },
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			s.progressed(req.Params)
		},
	})
	tr, stderr, err := s.transport(ctx)
	if err != nil {
		return false, err
	}
	cctx, cancel := context.WithTimeout(ctx, s.m.cfg.Connect)
	sess, err := client.Connect(cctx, tr, nil)
	cancel()
	if err != nil {
		return false, withStderr(err, stderr)
	}
	defer sess.Close()
	if err := s.list(ctx, sess); err != nil {
		return false, withStderr(err, stderr)
	}
	s.set(StateConnected, sess, nil)
	slog.Info("mcp: server connected", "server", s.name, "transport", s.cfg.Transport())
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	tick := time.NewTicker(s.m.cfg.Ping)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case err := <-done:
			if err == nil {
				err = errors.New("the server closed the connection")
			}
			return true, withStderr(err, stderr)
		case <-s.changed:
			if err := s.list(ctx, sess); err != nil {
				return true, err
			}
		case <-s.broken:
			if err := s.ping(ctx, sess); err != nil {
				return true, withStderr(err, stderr)
			}
		case <-tick.C:
			// A ping reaches the server whatever the SDK caches; listing
			// the tools again catches a change whose notification was
			// missed, or never sent.
			if err := s.ping(ctx, sess); err != nil {
				return true, withStderr(err, stderr)
			}
			if err := s.list(ctx, sess); err != nil {
				return true, withStderr(err, stderr)
			}
		}
	}
}

func (s *server) ping(ctx context.Context, sess *sdk.ClientSession) error {
	pctx, cancel := context.WithTimeout(ctx, s.m.cfg.Connect)
	defer cancel()
	if err := sess.Ping(pctx, nil); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// list reads the server's tools and merges them into what is known: the
// tools listed now, then those listed before and no longer (gone). A tool
// whose name, schema or size breaks the limits is left out, and named on
// /admin.
func (s *server) list(ctx context.Context, sess *sdk.ClientSession) error {
	lctx, cancel := context.WithTimeout(ctx, s.m.cfg.Connect)
	defer cancel()
	var live []knownTool
	var skipped []string
	skip := func(name, why string) {
		if len(skipped) < maxSkipped {
			skipped = append(skipped, fmt.Sprintf("%q (%s)", agent.Clip(strings.ToValidUTF8(name, "?"), 80), why))
		}
	}
	decl := 0
	for t, err := range sess.Tools(lctx, nil) {
		if err != nil {
			return fmt.Errorf("list the tools: %w", err)
		}
		if len(live) == maxTools {
			slog.Warn("mcp: a server lists too many tools; the rest are left out", "server", s.name, "max", maxTools)
			skip(t.Name, fmt.Sprintf("over %d tools", maxTools))
			break
		}
		if !toolName.MatchString(t.Name) {
			skip(t.Name, "not a tool name: 1 to 64 letters, digits, '_', '-' or '.', starting with a letter or digit")
			continue
		}
		if slices.ContainsFunc(live, func(l knownTool) bool { return l.Name == t.Name }) {
			skip(t.Name, "listed twice")
			continue
		}
		k := knownTool{Name: t.Name, Description: t.Description, ReadOnly: t.Annotations != nil && t.Annotations.ReadOnlyHint}
		if k.Description == "" {
			k.Description = t.Title
		}
		k.Description = agent.Clip(k.Description, maxDescRunes)
		if t.InputSchema != nil {
			if b, err := json.Marshal(t.InputSchema); err == nil {
				k.Schema = b
			}
		}
		if len(k.Schema) > maxSchemaBytes {
			skip(t.Name, fmt.Sprintf("its input schema is over %d KiB", maxSchemaBytes>>10))
			continue
		}
		if decl += len(k.Name) + len(k.Description) + len(k.Schema); decl > maxDeclBytes {
			skip(t.Name, fmt.Sprintf("the server's tools are over %d KiB of declarations", maxDeclBytes>>10))
			break
		}
		live = append(live, k)
	}
	if len(skipped) > 0 {
		slog.Warn("mcp: tools left out", "server", s.name, "tools", skipped)
	}
	s.m.mu.Lock()
	merged := slices.Clone(live)
	for _, k := range s.known {
		if len(merged) == len(live)+maxGone {
			break
		}
		if !slices.ContainsFunc(live, func(l knownTool) bool { return l.Name == k.Name }) && toolName.MatchString(k.Name) {
			k.Gone = true
			merged = append(merged, k)
		}
	}
	same := sameKnown(merged, s.known)
	s.known, s.skipped = merged, skipped
	s.m.rebuildLocked()
	s.m.mu.Unlock()
	if !same {
		// Not cut by Close or Reload, which wait for it: the list is
		// already what every page shows, and the next start must see it.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		s.m.remember(wctx, s.name, merged)
		cancel()
	}
	return nil
}

func sameKnown(a, b []knownTool) bool {
	return slices.EqualFunc(a, b, func(x, y knownTool) bool {
		return x.Name == y.Name && x.Description == y.Description && x.ReadOnly == y.ReadOnly && x.Gone == y.Gone && bytes.Equal(x.Schema, y.Schema)
	})
}

// set changes the server's state; err is the reason it is down.
func (s *server) set(state string, sess *sdk.ClientSession, err error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.state != state {
		s.since = time.Now()
	}
	s.state, s.sess = state, sess
	switch {
	case err != nil:
		s.lastErr, s.reason = s.cfg.redact(err.Error()), shortReason(err)
	case state == StateConnected:
		s.reason = ""
	}
	s.m.rebuildLocked()
}

// unavailableLocked is why the server's tools cannot run now ("" : they can).
func (s *server) unavailableLocked() string {
	switch {
	case s.state == StateConnected:
		return ""
	case s.state == StateConnecting && s.reason == "":
		return fmt.Sprintf("The MCP server %s is not reachable: Weft is still connecting to it.", s.name)
	default:
		return fmt.Sprintf("The MCP server %s is not reachable: %s.", s.name, s.reason)
	}
}

// toolsLocked is the server's tools for the agent.
func (s *server) toolsLocked() []agent.Tool {
	down := s.unavailableLocked()
	out := make([]agent.Tool, 0, len(s.known))
	for _, k := range s.known {
		t := agent.Tool{Name: ToolName(s.name, k.Name), Description: agent.Clip(k.Description, maxDescRunes), Class: agent.ClassExec,
			Origin: Origin(s.name), Unavailable: down}
		if k.ReadOnly {
			t.Class = agent.ClassRead
		}
		if k.Gone {
			t.Unavailable = fmt.Sprintf("The MCP server %s no longer offers this tool.", s.name)
		}
		if t.Description == "" {
			t.Description = "A tool of the MCP server " + s.name + "."
		}
		t.Schema = schemaOf(k.Schema)
		name := k.Name
		t.Run = func(ctx context.Context, env *agent.Env, args agent.Args) (agent.Result, error) {
			return s.call(ctx, env, name, args)
		}
		out = append(out, t)
	}
	return out
}

// transport builds the connection to the server. A stdio server gets PATH
// and its configured env, nothing else of Weft's environment; its stderr
// is kept (the end of it) to say why it exited. An HTTP server's requests
// end with ctx (Close, Reload).
func (s *server) transport(ctx context.Context) (sdk.Transport, *tailBuffer, error) {
	if s.cfg.Stdio() {
		cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range s.cfg.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		// Its own process group: a signal to Weft's group (a terminal's
		// Ctrl-C) reaches Weft, which ends the server itself, and the
		// whole group (the programs it started) when it closes.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		// A program the server started may keep its stderr open after
		// the server exited: Wait does not wait for it for ever.
		cmd.WaitDelay = s.m.cfg.Terminate
		tail := &tailBuffer{max: 2048}
		cmd.Stderr = tail
		return &groupTransport{CommandTransport: &sdk.CommandTransport{Command: cmd, TerminateDuration: s.m.cfg.Terminate}}, tail, nil
	}
	client := &http.Client{Transport: roundTripper{h: s.cfg.Headers, next: http.DefaultTransport, stop: ctx}}
	return &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: client, MaxRetries: 2}, nil, nil
}

// groupTransport is a stdio server whose process group is killed when its
// connection closes, once the SDK has ended the server itself: nothing it
// started (a shell's child, npx's node) outlives it.
type groupTransport struct{ *sdk.CommandTransport }

func (t *groupTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	conn, err := t.CommandTransport.Connect(ctx)
	if err != nil {
		return nil, err // it did not start
	}
	return &groupConn{Connection: conn, pgid: t.Command.Process.Pid}, nil
}

type groupConn struct {
	sdk.Connection
	pgid int
	once sync.Once
}

func (c *groupConn) Close() error {
	err := c.Connection.Close()
	c.once.Do(func() { _ = syscall.Kill(-c.pgid, syscall.SIGKILL) })
	return err
}

// maxBody caps a response of an HTTP server that is not an event stream
// (a JSON answer, an error page): the SDK reads it whole. Event streams are
// capped per event by the SDK, at the same size.
const maxBody = sdk.DefaultMaxEventSize

var errBodyTooLarge = fmt.Errorf("the server's answer is over the %d MiB limit", maxBody>>20)

// roundTripper adds the configured headers to every request to the server,
// caps what is read of an answer, and ends a request when stop ends: the
// SDK sends some requests (notifications/cancelled) on contexts of its own,
// which a server that does not answer would hold for seconds after Close.
// The session's DELETE, sent as it closes, keeps the SDK's own timeout.
type roundTripper struct {
	h    map[string]string
	next http.RoundTripper
	stop context.Context
}

func (h roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := r.Context(), context.CancelFunc(func() {})
	if h.stop != nil && r.Method != http.MethodDelete {
		ctx, cancel = context.WithCancel(ctx)
		unhook := context.AfterFunc(h.stop, cancel)
		done := cancel
		cancel = func() { unhook(); done() }
	}
	r = r.Clone(ctx)
	for k, v := range h.h {
		r.Header.Set(k, v)
	}
	resp, err := h.next.RoundTrip(r)
	if err != nil {
		cancel()
		return nil, err
	}
	left := int64(-1) // an event stream: capped per event by the SDK
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		left = maxBody
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: left, done: cancel}
	return resp, nil
}

// cappedBody fails a read past its limit (left < 0: no limit), and ends
// its request when closed.
type cappedBody struct {
	io.ReadCloser
	left int64
	done context.CancelFunc
}

func (b *cappedBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return b.ReadCloser.Read(p)
	}
	if b.left == 0 {
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n > 0 {
			return 0, errBodyTooLarge
		} else {
			return 0, err
		}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) lastLine() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// withStderr adds a stdio server's last words to the administrator's error.
func withStderr(err error, tail *tailBuffer) error {
	if line := tail.lastLine(); line != "" {
		return fmt.Errorf("%w (its last output: %s)", err, agent.Clip(line, 300))
	}
	return err
}
