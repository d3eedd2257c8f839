package mcp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"weft/agent"
	"weft/internal/mcptest"
	"weft/internal/testenv"
	"weft/internal/testwait"
	"weft/mcp"
)

// quick reconnects and checks often, so that tests see state changes fast.
func quick(servers map[string]mcp.ServerConfig) mcp.Config {
	return mcp.Config{Servers: servers, Retry: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond, Ping: 100 * time.Millisecond,
		Connect: 5 * time.Second, Terminate: time.Second}
}

func startManager(t *testing.T, store mcp.Store, cfg mcp.Config) *mcp.Manager {
	t.Helper()
	m := mcp.New(store, cfg)
	m.Start(context.Background())
	t.Cleanup(m.Close)
	return m
}

func toolNamed(m *mcp.Manager, name string) (agent.Tool, bool) {
	for _, t := range m.Tools() {
		if t.Name == name {
			return t, true
		}
	}
	return agent.Tool{}, false
}

// waitTool waits until the tool is listed and cond holds for it.
func waitTool(t *testing.T, m *mcp.Manager, name, what string, cond func(agent.Tool) bool) agent.Tool {
	t.Helper()
	var tool agent.Tool
	testwait.For(t, name+" "+what, 15*time.Second, func() bool {
		var ok bool
		tool, ok = toolNamed(m, name)
		return ok && cond(tool)
	})
	return tool
}

func available(t agent.Tool) bool { return t.Unavailable == "" }

func run(t *testing.T, tool agent.Tool, args agent.Args) (string, error) {
	t.Helper()
	res, err := tool.Run(context.Background(), &agent.Env{}, args)
	return res.Output, err
}

func toolError(err error) string {
	var te *agent.ToolError
	if errors.As(err, &te) {
		return te.Msg
	}
	return ""
}

// Over both transports a server's tools are listed as SERVER__TOOL with
// its schema, origin and class, and calls give text, summaries of other
// content, capped output and the server's errors as tool errors.
func TestAServersToolsAreListedAndCalledOverBothTransports(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) mcp.ServerConfig
	}{
		{"streamable HTTP", func(t *testing.T) mcp.ServerConfig { return mcptest.StartHTTP(t).Config() }},
		{"stdio", func(t *testing.T) mcp.ServerConfig {
			return mcptest.StdioConfig(t, map[string]string{"GREETING": "hello"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := startManager(t, testenv.NewDB(t), quick(map[string]mcp.ServerConfig{"srv": tc.cfg(t)}))
			echo := waitTool(t, m, "srv__echo", "is available", available)
			if echo.Class != agent.ClassRead || echo.Origin != "MCP server srv" || echo.Description != "Repeat the text." {
				t.Errorf("echo is %s from %q (%q): a read-only tool of the server", echo.Class, echo.Origin, echo.Description)
			}
			if echo.Schema == nil || !strings.Contains(echo.Schema.String(), `"text"`) {
				t.Errorf("echo's schema lacks its argument: %v", echo.Schema)
			}
			note, _ := toolNamed(m, "srv__note")
			if note.Class != agent.ClassExec {
				t.Errorf("a tool not marked read-only is %s, want exec (ask first)", note.Class)
			}
			if out, err := run(t, echo, agent.Args{"text": "hi"}); err != nil || out != "echo: hi" {
				t.Errorf("echo: %q, %v", out, err)
			}
			fail, _ := toolNamed(m, "srv__fail")
			if _, err := run(t, fail, nil); toolError(err) != "the disk is full" {
				t.Errorf("an isError result: %v, want the tool error the model sees", err)
			}
			pic, _ := toolNamed(m, "srv__picture")
			if out, err := run(t, pic, nil); err != nil || out != "a cat\n[image image/png, 12 KB]" {
				t.Errorf("an image result: %q, %v", out, err)
			}
			big, _ := toolNamed(m, "srv__big")
			if out, err := run(t, big, nil); err != nil || len(out) > 65<<10 || !strings.Contains(out, "[truncated: ") {
				t.Errorf("a 100 KB result came back as %d bytes (%v), want it capped at 64 KB", len(out), err)
			}
			st := m.Status().Servers[0]
			if st.State != mcp.StateConnected || len(st.Tools) < 8 {
				t.Errorf("status: %+v", st)
			}
		})
	}
}

// A stdio server gets PATH and its configured env, nothing of Weft's
// environment (its database password, its keys).
func TestAStdioServerSeesOnlyPathAndItsOwnEnv(t *testing.T) {
	t.Parallel()
	m := startManager(t, testenv.NewDB(t), quick(map[string]mcp.ServerConfig{"box": mcptest.StdioConfig(t, map[string]string{"TOKEN": "for-this-server"})}))
	environ := waitTool(t, m, "box__environ", "is available", available)
	out, err := run(t, environ, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, kv := range strings.Split(out, "\n") {
		names = append(names, strings.SplitN(kv, "=", 2)[0])
	}
	if got := strings.Join(names, " "); got != "PATH TOKEN "+mcptest.ChildEnv {
		t.Errorf("the server's environment has %s, want only PATH, TOKEN and %s", got, mcptest.ChildEnv)
	}
	if !strings.Contains(out, "TOKEN=for-this-server") {
		t.Errorf("the configured env is missing: %s", out)
	}
}

// A server that goes down keeps its tools listed, unavailable with the
// reason; when it answers again they are available again. A stdio server
// whose process ends is started again.
func TestAServerThatGoesDownIsListedWithTheReasonAndReconnected(t *testing.T) {
	t.Parallel()
	srv := mcptest.StartHTTP(t)
	m := startManager(t, testenv.NewDB(t), quick(map[string]mcp.ServerConfig{"web": srv.Config(), "pipe": mcptest.StdioConfig(t, nil)}))
	note := waitTool(t, m, "web__note", "is available", available)

	srv.SetDown(true)
	_, err := run(t, note, agent.Args{"text": "x"})
	if msg := toolError(err); !strings.HasPrefix(msg, "The MCP server web is not reachable: ") {
		t.Errorf("a call to a server that is down: %v", err)
	}
	down := waitTool(t, m, "web__note", "is listed as unreachable", func(t agent.Tool) bool { return !available(t) })
	if !strings.HasPrefix(down.Unavailable, "The MCP server web is not reachable: ") || strings.Contains(down.Unavailable, "127.0.0.1") {
		t.Errorf("the reason is %q: it must name the server and not its address", down.Unavailable)
	}
	if _, err := run(t, down, agent.Args{"text": "x"}); toolError(err) != down.Unavailable {
		t.Errorf("a call while down: %v, want %q", err, down.Unavailable)
	}
	var st mcp.ServerStatus
	for _, s := range m.Status().Servers {
		if s.Name == "web" {
			st = s
		}
	}
	if st.State == mcp.StateConnected || st.LastError == "" || len(st.Tools) == 0 {
		t.Errorf("the admin's view of a server that is down: %+v", st)
	}
	srv.SetDown(false)
	again := waitTool(t, m, "web__note", "is available again", available)
	if out, err := run(t, again, agent.Args{"text": "back"}); err != nil || out != "noted: back" {
		t.Errorf("after the server came back: %q, %v", out, err)
	}

	exit := waitTool(t, m, "pipe__exit", "is available", available)
	_, _ = run(t, exit, nil) // the process ends in the middle of the call
	waitTool(t, m, "pipe__echo", "is available after the process was started again", func(tl agent.Tool) bool {
		if !available(tl) {
			return false
		}
		out, err := run(t, tl, agent.Args{"text": "again"})
		return err == nil && out == "echo: again"
	})
}

// A tool the server stops offering stays listed as no longer offered, and
// a restart (a new manager over the same database, the server
// unreachable) still lists the last known tools with the reason.
func TestRemovedToolsAndLastKnownToolsSurviveARestart(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	srv := mcptest.StartHTTP(t)
	m := mcp.New(store, quick(map[string]mcp.ServerConfig{"srv": srv.Config()}))
	m.Start(context.Background())
	waitTool(t, m, "srv__note", "is available", available)
	srv.Remove("note")
	gone := waitTool(t, m, "srv__note", "is no longer offered", func(t agent.Tool) bool { return !available(t) })
	if gone.Unavailable != "The MCP server srv no longer offers this tool." {
		t.Errorf("a removed tool says %q", gone.Unavailable)
	}
	if echo, _ := toolNamed(m, "srv__echo"); !available(echo) {
		t.Errorf("the other tools stay available: %q", echo.Unavailable)
	}
	if st := m.Status().Servers[0]; strings.Join(st.Gone, ",") != "note" {
		t.Errorf("the admin's view lists as gone: %q", st.Gone)
	}
	m.Close()

	// The next start: the server is not there.
	dead := mcp.ServerConfig{URL: "http://127.0.0.1:1/mcp"}
	next := startManager(t, store, quick(map[string]mcp.ServerConfig{"srv": dead}))
	echo, ok := toolNamed(next, "srv__echo")
	if !ok || available(echo) || echo.Class != agent.ClassRead || echo.Schema == nil {
		t.Fatalf("right after a restart the last known tools are listed, unavailable: %+v (%v)", echo, ok)
	}
	waitTool(t, next, "srv__echo", "says the server is unreachable", func(t agent.Tool) bool {
		return t.Unavailable == "The MCP server srv is not reachable: the connection was refused."
	})
	if n, _ := toolNamed(next, "srv__note"); n.Unavailable != "The MCP server srv no longer offers this tool." {
		t.Errorf("after a restart the removed tool says %q", n.Unavailable)
	}
}

// A server's timeout cuts a slow call, and a cancelled context (Stop)
// ends an in-flight call at once; the server is told in both cases.
func TestASlowCallIsCutAtTheTimeoutAndStopCancelsIt(t *testing.T) {
	t.Parallel()
	srv := mcptest.StartHTTP(t)
	cfg := srv.Config()
	cfg.Timeout = 0.3
	m := startManager(t, testenv.NewDB(t), quick(map[string]mcp.ServerConfig{"srv": cfg, "free": srv.Config()}))
	slow := waitTool(t, m, "srv__slow", "is available", available)
	started := time.Now()
	_, err := run(t, slow, nil)
	if msg := toolError(err); msg != "The MCP server srv did not answer within 300ms, so the call was stopped." {
		t.Errorf("a slow call: %v", err)
	}
	if d := time.Since(started); d > 5*time.Second {
		t.Errorf("the timeout took %s", d)
	}
	testwait.For(t, "the server hears the timed-out call was cancelled", 10*time.Second, func() bool { return srv.Cancelled.Load() == 1 })
	if name := testwait.Recv(t, "the first call", time.Second, srv.Calls); name != "slow" {
		t.Fatalf("the server saw %s", name)
	}

	// Stop: no server timeout, the caller's context ends mid-call.
	free := waitTool(t, m, "free__slow", "is available", available)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	progress := make(chan string, 1)
	go func() {
		_, err := free.Run(ctx, &agent.Env{Progress: func(s string) { progress <- s }}, nil)
		done <- err
	}()
	if name := testwait.Recv(t, "the call", 10*time.Second, srv.Calls); name != "slow" {
		t.Fatalf("the server saw %s", name)
	}
	if got := testwait.Recv(t, "the call's progress", 5*time.Second, progress); got != "still thinking" {
		t.Errorf("the call's progress reached the run as %q", got)
	}
	stopped := time.Now()
	cancel()
	err = testwait.Recv(t, "the stopped call returns", 5*time.Second, done)
	if err == nil || errors.Is(err, context.Canceled) || toolError(err) != "" {
		t.Errorf("a stopped call returned %v: want an interruption that is not context.Canceled (the server may have acted)", err)
	}
	if d := time.Since(stopped); d > time.Second {
		t.Errorf("the stop took %s", d)
	}
	testwait.For(t, "the server hears the stopped call was cancelled", 10*time.Second, func() bool { return srv.Cancelled.Load() == 2 })
}

// Start never waits for a server: one that accepts but never answers is
// "connecting" while the rest of Weft runs, and Close ends the attempt.
func TestStartAndCloseDoNotWaitForAServerThatNeverAnswers(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); hang.Close() })
	cfg := quick(map[string]mcp.ServerConfig{"mute": {URL: hang.URL}})
	cfg.Connect = time.Minute
	m := mcp.New(testenv.NewDB(t), cfg)
	started := time.Now()
	m.Start(context.Background())
	if d := time.Since(started); d > 2*time.Second {
		t.Errorf("Start took %s", d)
	}
	if st := m.Status().Servers[0]; st.State != mcp.StateConnecting {
		t.Errorf("a server that has not answered yet is %s", st.State)
	}
	started = time.Now()
	m.Close()
	if d := time.Since(started); d > 2*time.Second {
		t.Errorf("Close took %s", d)
	}
}
