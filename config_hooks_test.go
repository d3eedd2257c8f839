package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WEFT_HOOKS_CONFIG names the administrator's hooks file, read and checked
// at start-up; WEFT_HOOKS_ALLOW lists what workspaces' hooks may reach.
func TestWEFTHooksConfigIsReadAndCheckedAtStartUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hooks.json")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"hooks": [{"event": "*", "url": "https://hooks.example/weft", "secret": "s3"},
		{"event": "tool_execution_start", "command": ["/usr/local/bin/policy", "--strict"], "timeout": 2.5}]}`)
	t.Setenv("WEFT_HOOKS_CONFIG", path)
	t.Setenv("WEFT_HOOKS_ALLOW", "10.0.0.0/8, 192.168.1.7,hooks.internal")
	c, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	h := appConfig(c).Agent.Hooks
	if len(h.Hooks) != 2 || h.Hooks[0].URL != "https://hooks.example/weft" || h.Hooks[0].Secret != "s3" ||
		strings.Join(h.Hooks[1].Command, " ") != "/usr/local/bin/policy --strict" || h.Hooks[1].Timeout != 2.5 {
		t.Errorf("hooks = %+v", h.Hooks)
	}
	if strings.Join(h.Allow, " ") != "10.0.0.0/8 192.168.1.7 hooks.internal" {
		t.Errorf("allow = %q", h.Allow)
	}
	for file, want := range map[string]string{
		`{"hooks": [{"event": "before_everything", "url": "https://x.example/"}]}`:   `unknown event "before_everything"`,
		`{"hooks": [{"event": "*", "url": "https://x.example/", "command": ["x"]}]}`: `either "url" or "command"`,
		`{"hooks": [{"event": "*", "url": "ftp://x.example/"}]}`:                     "http or https",
		`{"hooks": [{"event": "*", "command": ["x"], "timeout": 900}]}`:              "timeout",
		`{"mcpServers": {}}`: "not a hooks file",
	} {
		write(file)
		if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), "WEFT_HOOKS_CONFIG") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", file, err, want)
		}
	}
	t.Setenv("WEFT_HOOKS_CONFIG", filepath.Join(t.TempDir(), "missing.json"))
	if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), "WEFT_HOOKS_CONFIG") {
		t.Errorf("a missing file: %v", err)
	}
	t.Setenv("WEFT_HOOKS_CONFIG", "")
	for _, bad := range []string{"http://10.0.0.1/", "10.0.0.0/33", "host:8080"} {
		t.Setenv("WEFT_HOOKS_ALLOW", bad)
		if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), "WEFT_HOOKS_ALLOW") {
			t.Errorf("WEFT_HOOKS_ALLOW=%s: %v", bad, err)
		}
	}
}
