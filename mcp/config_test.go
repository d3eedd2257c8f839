package mcp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"weft/internal/mcptest"
	"weft/internal/testenv"
	"weft/mcp"
)

func TestTheConfigurationFileIsReadInTheShapeOtherClientsUse(t *testing.T) {
	t.Parallel()
	servers, err := mcp.Parse([]byte(`{"mcpServers": {
		"docs": {"url": "https://mcp.example.com/mcp?key=secret", "headers": {"Authorization": "Bearer x"}, "timeout": 5},
		"files": {"type": "stdio", "command": "mcp-files", "args": ["--root", "/srv"], "env": {"TOKEN": "t"}}
	}, "otherClientsSetting": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if d := servers["docs"]; d.Stdio() || d.Headers["Authorization"] != "Bearer x" || d.Transport() != "streamable HTTP: https://mcp.example.com/mcp" {
		t.Errorf("docs: %+v, shown as %q (the query may hold a key: not shown)", d, d.Transport())
	}
	if f := servers["files"]; !f.Stdio() || f.Transport() != "stdio: mcp-files --root /srv" || f.Env["TOKEN"] != "t" {
		t.Errorf("files: %+v, shown as %q", f, f.Transport())
	}
}

func TestABadConfigurationSaysWhichServerAndWhatIsWrong(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"mcpServers": `:           "not valid JSON",
		`{"servers": {}}`:           `no "mcpServers" object`,
		`{"mcpServers": {"a": {}}}`: `server "a": give "url" (streamable HTTP) or "command" (stdio)`,
		`{"mcpServers": {"a": {"url": "http://x/", "command": "y"}}}`:    `server "a": give either "url"`,
		`{"mcpServers": {"a__b": {"command": "y"}}}`:                     `server "a__b": a server's name is`,
		`{"mcpServers": {"a b": {"command": "y"}}}`:                      `server "a b": a server's name is`,
		`{"mcpServers": {"a": {"url": "ftp://x/"}}}`:                     `server "a": "url" must be an http:// or https:// URL`,
		`{"mcpServers": {"a": {"url": "http://x/", "type": "sse"}}}`:     `server "a": the old SSE transport is not supported`,
		`{"mcpServers": {"a": {"command": "y", "timeout": -1}}}`:         `server "a": "timeout" is a number of seconds`,
		`{"mcpServers": {"a": {"url": "http://x/", "env": {"A": "b"}}}}`: `server "a": "args" and "env" are for a "command" server`,
		`{"mcpServers": {"a": {"command": "y", "type": "http"}}}`:        `server "a": "type" "http" does not match`,
		`{"mcpServers": {"a": {"command": "y", "args": "z"}}}`:           "not valid JSON",
	} {
		if _, err := mcp.Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	if _, err := mcp.LoadFile(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "WEFT_MCP_CONFIG: open ") {
		t.Errorf("a missing file: %v", err)
	}
}

// Reload reads the file again: a broken file keeps the servers running and
// is reported; a good one replaces them.
func TestReloadKeepsTheServersOnABrokenFileAndReplacesThemOnAGoodOne(t *testing.T) {
	t.Parallel()
	srv := mcptest.StartHTTP(t)
	file := filepath.Join(t.TempDir(), "mcp.json")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"mcpServers": {"one": {"url": "` + srv.URL + `"}}}`)
	servers, err := mcp.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg := quick(servers)
	cfg.File = file
	m := startManager(t, testenv.NewDB(t), cfg)
	waitTool(t, m, "one__echo", "is available", available)

	write(`{"mcpServers": {"one": {"url": "nope"}}}`)
	if err := m.Reload(context.Background()); err == nil {
		t.Fatal("a broken file reloaded")
	}
	if st := m.Status(); !strings.Contains(st.ConfigError, `server "one": "url" must be`) || len(st.Servers) != 1 || st.Servers[0].State != mcp.StateConnected {
		t.Errorf("after a broken reload: %+v", st)
	}
	write(`{"mcpServers": {"two": {"url": "` + srv.URL + `"}}}`)
	if err := m.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitTool(t, m, "two__echo", "is available", available)
	if _, ok := toolNamed(m, "one__echo"); ok || m.Status().ConfigError != "" {
		t.Errorf("the removed server's tools stay listed, or the old error: %+v", m.Status())
	}
}
