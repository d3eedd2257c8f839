// Package mcptest is an MCP server for Weft's tests, built with the same
// SDK Weft's client uses: over streamable HTTP (an httptest server) or over
// stdio (the test binary itself, started again as the server: see
// ChildMain). Its tools cover what the client must handle: a read-only
// echo, an effectful note, an error result, a slow call, markup, an image
// and an oversized result.
package mcptest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft/mcp"
)

// ChildEnv, set in a process's environment, makes ChildMain serve MCP over
// stdio instead of running tests.
const ChildEnv = "WEFT_MCPTEST_STDIO"

// Server is a running test server.
type Server struct {
	SDK *sdk.Server
	URL string // the streamable HTTP endpoint ("" over stdio)

	// Calls receives the name of each call as it starts (buffered; a full
	// buffer drops).
	Calls chan string
	// Cancelled counts calls of slow that ended because the client gave
	// up on them.
	Cancelled atomic.Int64

	down atomic.Bool
	mu   sync.Mutex
	ts   *httptest.Server
}

type textIn struct {
	Text string `json:"text" jsonschema:"the text"`
}

type empty struct{}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// New builds the server with its tools.
func New() *Server {
	s := &Server{SDK: sdk.NewServer(&sdk.Implementation{Name: "weft-test", Version: "1"}, nil), Calls: make(chan string, 64)}
	started := func(name string) {
		select {
		case s.Calls <- name:
		default:
		}
	}
	ro := &sdk.ToolAnnotations{ReadOnlyHint: true}
	sdk.AddTool(s.SDK, &sdk.Tool{Name: "echo", Description: "Repeat the text.", Annotations: ro},
		func(ctx context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			started("echo")
			return text("echo: " + in.Text), nil, nil
		})
	sdk.AddTool(s.SDK, &sdk.Tool{Name: "note", Description: "Keep a note on the server."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			started("note")
			return text("noted: " + in.Text), nil, nil
		})
	sdk.AddTool(s.SDK, &sdk.Tool{Name: "fail", Description: "Always fails."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			started("fail")
			r := text("the disk is full")
			r.IsError = true
			return r, nil, nil
		})
	sdk.AddTool(s.SDK, &sdk.Tool{Name: "slow", Description: "Answers only when the client gives up.", Annotations: ro},
		func(ctx context.Context, req *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			started("slow")
			if req.Params.GetProgressToken() != nil {
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
					Message: "still thinking", Progress: 1})
			}
			<-ctx.Done()
			s.Cancelled.Add(1)
			return nil, nil, ctx.Err()
		})
	sdk.AddTool(s.SDK, &sdk.Tool{Name: "html", Description: "Returns markup.", Annotations: ro},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			started("html")
			return text(`<script>alert("mcp")</script><b>bold</b>`), nil, nil
		})
	sdk.AddTool(s.SDK, &sdk.Tool{Name: "picture", Description: "Returns an image and a caption.", Annotations: ro},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			started("picture")
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a cat"},
				&sdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 12<<10)}}}, nil, nil
		})
	sdk.AddTool(s.SDK, &sdk.Tool{Name: "big", Description: "Returns 100 KB of text.", Annotations: ro},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			started("big")
			return text(strings.Repeat("x", 100<<10)), nil, nil
		})
	sdk.AddTool(s.SDK, &sdk.Tool{Name: "environ", Description: "Lists its environment.", Annotations: ro},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			env := os.Environ()
			slices.Sort(env)
			return text(strings.Join(env, "\n")), nil, nil
		})
	sdk.AddTool(s.SDK, &sdk.Tool{Name: "exit", Description: "Ends the server's process (stdio)."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	return s
}

// StartHTTP serves New over streamable HTTP until the test ends.
func StartHTTP(t testing.TB) *Server {
	s := New()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.SDK }, nil)
	s.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	s.URL = s.ts.URL + "/mcp"
	t.Cleanup(func() {
		s.ts.CloseClientConnections()
		s.ts.Close()
	})
	return s
}

// Config is the server's entry for Weft's configuration.
func (s *Server) Config() mcp.ServerConfig { return mcp.ServerConfig{URL: s.URL} }

// SetDown makes the server answer every request with 503 (and drops its
// open streams), or serve again.
func (s *Server) SetDown(down bool) {
	s.down.Store(down)
	if down {
		s.ts.CloseClientConnections()
	}
}

// Remove stops offering tools (the client is told the list changed).
func (s *Server) Remove(names ...string) { s.SDK.RemoveTools(names...) }

// StdioConfig is a configuration that starts the test binary as a stdio
// server; env is added to its environment.
func StdioConfig(t testing.TB, env map[string]string) mcp.ServerConfig {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{ChildEnv: "1"}
	for k, v := range env {
		all[k] = v
	}
	return mcp.ServerConfig{Command: exe, Args: []string{"-test.run=^$"}, Env: all}
}

// ChildMain serves MCP over stdio and exits, when the process was started
// by StdioConfig; otherwise it returns at once. Call it first in TestMain.
func ChildMain() {
	if os.Getenv(ChildEnv) == "" {
		return
	}
	err := New().SDK.Run(context.Background(), &sdk.StdioTransport{})
	if err != nil && !strings.Contains(err.Error(), "EOF") {
		os.Exit(1)
	}
	os.Exit(0)
}
