package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft/agent"
)

// maxTools caps one server's tool list: a server cannot flood the model's
// tool declarations.
const maxTools = 128

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

// loop connects, serves and reconnects with backoff until ctx ends.
func (s *server) loop(ctx context.Context) {
	delay := s.m.cfg.Retry
	for {
		connected, err := s.session(ctx)
		if ctx.Err() != nil {
			s.set(StateDown, nil, errors.New("stopped"))
			return
		}
		if connected {
			delay = s.m.cfg.Retry
		}
		s.set(StateDown, nil, err)
		slog.Warn("mcp: server unreachable", "server", s.name, "err", err, "retry_in", delay)
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
	tr, stderr, err := s.transport()
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
// tools listed now, then those listed before and no longer (gone).
func (s *server) list(ctx context.Context, sess *sdk.ClientSession) error {
	lctx, cancel := context.WithTimeout(ctx, s.m.cfg.Connect)
	defer cancel()
	var live []knownTool
	for t, err := range sess.Tools(lctx, nil) {
		if err != nil {
			return fmt.Errorf("list the tools: %w", err)
		}
		if len(live) == maxTools {
			slog.Warn("mcp: a server lists too many tools; the rest are left out", "server", s.name, "max", maxTools)
			break
		}
		k := knownTool{Name: t.Name, Description: t.Description, ReadOnly: t.Annotations != nil && t.Annotations.ReadOnlyHint}
		if k.Description == "" {
			k.Description = t.Title
		}
		if t.InputSchema != nil {
			if b, err := json.Marshal(t.InputSchema); err == nil {
				k.Schema = b
			}
		}
		live = append(live, k)
	}
	s.m.mu.Lock()
	merged := slices.Clone(live)
	for _, k := range s.known {
		if !slices.ContainsFunc(live, func(l knownTool) bool { return l.Name == k.Name }) {
			k.Gone = true
			merged = append(merged, k)
		}
	}
	same := sameKnown(merged, s.known)
	s.known = merged
	s.m.rebuildLocked()
	s.m.mu.Unlock()
	if !same {
		s.m.remember(ctx, s.name, merged)
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
		s.lastErr, s.reason = err.Error(), shortReason(err)
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
		t := agent.Tool{Name: ToolName(s.name, k.Name), Description: clipRunes(k.Description, 2000), Class: agent.ClassExec,
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
// is kept (the end of it) to say why it exited.
func (s *server) transport() (sdk.Transport, *tailBuffer, error) {
	if s.cfg.Stdio() {
		cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range s.cfg.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		// Its own process group: a signal to Weft's group (a terminal's
		// Ctrl-C) reaches Weft, which ends the server itself.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		tail := &tailBuffer{max: 2048}
		cmd.Stderr = tail
		return &sdk.CommandTransport{Command: cmd, TerminateDuration: s.m.cfg.Terminate}, tail, nil
	}
	client := &http.Client{Transport: headers{h: s.cfg.Headers, next: http.DefaultTransport}}
	return &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: client, MaxRetries: 2}, nil, nil
}

// headers adds the configured headers to every request to the server.
type headers struct {
	h    map[string]string
	next http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.h {
			r.Header.Set(k, v)
		}
	}
	return h.next.RoundTrip(r)
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
		return fmt.Errorf("%w (its last output: %s)", err, clipRunes(line, 300))
	}
	return err
}
