// Package mcp connects Weft's agent to the MCP servers the administrator
// configures (WEFT_MCP_CONFIG), over streamable HTTP or stdio, with the
// official Go SDK, and offers their tools as an agent.Provider: named
// SERVER__TOOL, governed like the built-ins (workspace rules, approvals,
// the trace), listed with the reason when they cannot run (the server is
// down, the tool was removed). It keeps every server connected in the
// background, reconnecting with backoff, and remembers each server's last
// known tools in the settings table so that a restart still lists them.
//
// It never blocks the agent on a server: Tools answers from what it knows,
// a call is cut at the server's timeout and when its context ends, and a
// server's failure is the call's error result, never the run's. It never
// hands a stdio server the environment of Weft itself (only PATH and the
// server's configured env), and it treats everything a server returns as
// untrusted text: capped, and rendered escaped by the views like any tool
// output.
package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// ServerConfig is one entry of the configuration file's mcpServers: either
// a streamable HTTP endpoint (URL, Headers) or a program spoken to over
// stdio (Command, Args, Env).
type ServerConfig struct {
	// Type is optional, as other MCP clients write it: "stdio", "http" or
	// "streamable-http"; the fields given decide otherwise.
	Type    string            `json:"type,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Timeout is how many seconds one call may take (0: only the agent's
	// tool timeout applies).
	Timeout float64 `json:"timeout,omitempty"`
}

// Stdio reports whether the server is a program spoken to over stdio.
func (c ServerConfig) Stdio() bool { return c.Command != "" }

// Transport names the server's transport and address for the
// administrator, without headers, environment or a URL's query (they may
// hold secrets).
func (c ServerConfig) Transport() string {
	if c.Stdio() {
		return "stdio: " + strings.Join(append([]string{c.Command}, c.Args...), " ")
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return "streamable HTTP"
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return "streamable HTTP: " + u.String()
}

// redact takes the configuration's secrets out of a message for the
// administrator or the log (an error quotes the URL with its query; a
// stdio server may print its token as it fails): a URL's query values and
// password, the headers' and the env's values.
func (c ServerConfig) redact(msg string) string {
	var secrets []string
	if u, err := url.Parse(c.URL); err == nil {
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
		for _, vs := range u.Query() {
			secrets = append(secrets, vs...)
		}
		secrets = append(secrets, u.RawQuery)
	}
	for _, v := range c.Headers {
		secrets = append(secrets, v)
		if _, tok, ok := strings.Cut(v, " "); ok {
			secrets = append(secrets, tok) // "Bearer TOKEN"
		}
	}
	for _, v := range c.Env {
		secrets = append(secrets, v)
	}
	// The longest first, so that a secret containing another goes whole.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, v := range secrets {
		if len(v) >= 6 { // shorter values ("1", "true") are settings, not secrets
			msg = strings.ReplaceAll(msg, v, "[redacted]")
		}
	}
	return msg
}

func (c ServerConfig) callTimeout() time.Duration {
	return time.Duration(c.Timeout * float64(time.Second))
}

// serverName is what a server may be called: its tools are named
// NAME__TOOL, so the name itself never holds "__".
var serverName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$`)

// Parse reads a configuration file's contents: {"mcpServers": {NAME:
// {...}}}. Every error names the server and the field at fault.
func Parse(data []byte) (map[string]ServerConfig, error) {
	var file struct {
		Servers *map[string]ServerConfig `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("not valid JSON of the shape {\"mcpServers\": {...}}: %w", err)
	}
	if file.Servers == nil {
		return nil, errors.New(`no "mcpServers" object`)
	}
	servers := *file.Servers
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := check(name, servers[name]); err != nil {
			return nil, fmt.Errorf("server %q: %w", name, err)
		}
	}
	return servers, nil
}

func check(name string, c ServerConfig) error {
	switch {
	case !serverName.MatchString(name) || strings.Contains(name, "__"):
		return errors.New(`a server's name is 1 to 48 letters, digits, "-" or "_", without "__" (its tools are named NAME__TOOL)`)
	case c.URL != "" && c.Command != "":
		return errors.New(`give either "url" (streamable HTTP) or "command" (stdio), not both`)
	case c.URL == "" && c.Command == "":
		return errors.New(`give "url" (streamable HTTP) or "command" (stdio)`)
	case c.Timeout < 0:
		return errors.New(`"timeout" is a number of seconds, 0 or more`)
	}
	switch c.Type {
	case "", "stdio", "http", "streamable-http", "streamableHttp":
	case "sse":
		return errors.New(`the old SSE transport is not supported: use the server's streamable HTTP endpoint`)
	default:
		return fmt.Errorf(`"type" %q is not one of stdio, http, streamable-http`, c.Type)
	}
	if (c.Type == "stdio") != c.Stdio() && c.Type != "" {
		return fmt.Errorf(`"type" %q does not match the fields given`, c.Type)
	}
	if c.Stdio() {
		if len(c.Headers) > 0 {
			return errors.New(`"headers" are for a "url" server`)
		}
		for k := range c.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return fmt.Errorf(`"env" has a bad variable name %q`, k)
			}
		}
		return nil
	}
	if len(c.Env) > 0 || len(c.Args) > 0 {
		return errors.New(`"args" and "env" are for a "command" server`)
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf(`"url" must be an http:// or https:// URL, got %q`, c.URL)
	}
	return nil
}

// LoadFile reads and checks the configuration file at path.
func LoadFile(path string) (map[string]ServerConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("WEFT_MCP_CONFIG: %w", err)
	}
	servers, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("WEFT_MCP_CONFIG %s: %w", path, err)
	}
	return servers, nil
}
