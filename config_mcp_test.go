package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WEFT_MCP_CONFIG names the administrator's MCP servers; a file that does
// not parse stops start-up with the server and the field at fault.
func TestWEFTMCPConfigReachesTheAppAndABadFileStopsStartUp(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(good, []byte(`{"mcpServers": {"docs": {"url": "http://127.0.0.1:9000/mcp"}, "files": {"command": "mcp-files"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WEFT_MCP_CONFIG", good)
	c, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if m := appConfig(c).MCP; m.File != good || len(m.Servers) != 2 || !m.Servers["files"].Stdio() {
		t.Errorf("the app's MCP configuration: %+v", m)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"mcpServers": {"docs": {"url": "http://x/", "command": "y"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WEFT_MCP_CONFIG", bad)
	if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), `WEFT_MCP_CONFIG `+bad+`: server "docs": give either "url"`) {
		t.Errorf("a bad file: %v", err)
	}
	t.Setenv("WEFT_MCP_CONFIG", "")
	if c, err := loadConfig(); err != nil || appConfig(c).MCP.File != "" || appConfig(c).MCP.Servers != nil {
		t.Errorf("unset: %+v %v", appConfig(c).MCP, err)
	}
}
