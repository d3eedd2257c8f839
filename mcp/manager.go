package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"weft/agent"
)

// Store keeps each server's last known tools (the settings table).
type Store interface {
	Setting(ctx context.Context, key, def string) (string, error)
	SetSetting(ctx context.Context, key, value string) error
}

// Config is the administrator's servers and how Weft keeps them connected.
type Config struct {
	// File is WEFT_MCP_CONFIG, read again by Reload ("" : no file).
	File string
	// Servers are the servers to start with (from File, read at start-up,
	// or given directly by tests).
	Servers map[string]ServerConfig
	// Retry is the first wait before reconnecting a server that failed
	// (1 s); each failure doubles it, up to RetryMax (1 min), until a
	// connection lasts RetryMax.
	Retry, RetryMax time.Duration
	// Ping is how often a connected server is checked, by listing its
	// tools again (30 s).
	Ping time.Duration
	// Connect caps connecting and listing the tools (20 s).
	Connect time.Duration
	// Terminate is how long a stdio server may take to exit once its
	// stdin is closed before it is signalled (2 s).
	Terminate time.Duration
}

func (c Config) withDefaults() Config {
	if c.Retry <= 0 {
		c.Retry = time.Second
	}
	if c.RetryMax < c.Retry {
		c.RetryMax = max(time.Minute, c.Retry)
	}
	if c.Ping <= 0 {
		c.Ping = 30 * time.Second
	}
	if c.Connect <= 0 {
		c.Connect = 20 * time.Second
	}
	if c.Terminate <= 0 {
		c.Terminate = 2 * time.Second
	}
	return c
}

// Server states.
const (
	StateConnecting = "connecting"
	StateConnected  = "connected"
	StateDown       = "down"
)

// Manager keeps the configured servers connected and offers their tools.
type Manager struct {
	store Store
	cfg   Config

	tools atomic.Pointer[[]agent.Tool]

	mu        sync.Mutex
	servers   []*server // by name
	configErr string    // the last Reload's error
	loaded    time.Time
	stop      context.CancelFunc
	wg        sync.WaitGroup
	closed    bool
	reloadMu  sync.Mutex // one Reload at a time
}

// New returns a manager of cfg's servers; nothing connects until Start.
func New(store Store, cfg Config) *Manager {
	m := &Manager{store: store, cfg: cfg.withDefaults()}
	m.tools.Store(&[]agent.Tool{})
	return m
}

// Start lists the servers' last known tools and begins connecting them in
// the background: it never waits for a server.
func (m *Manager) Start(ctx context.Context) {
	m.reloadMu.Lock()
	defer m.reloadMu.Unlock()
	m.begin(ctx, m.cfg.Servers)
}

// Reload reads the configuration file again and reconnects every server.
// A file that cannot be read or is invalid leaves the servers as they were;
// its error is returned and shown in Status.
func (m *Manager) Reload(ctx context.Context) error {
	m.reloadMu.Lock()
	defer m.reloadMu.Unlock()
	servers := m.cfg.Servers
	if m.cfg.File != "" {
		var err error
		if servers, err = LoadFile(m.cfg.File); err != nil {
			m.mu.Lock()
			m.configErr = err.Error()
			m.mu.Unlock()
			return err
		}
	}
	m.end()
	m.begin(ctx, servers)
	return nil
}

// Close disconnects every server (stdio servers are ended).
func (m *Manager) Close() {
	m.reloadMu.Lock()
	defer m.reloadMu.Unlock()
	m.end()
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
}

// begin starts a generation of servers. Called with reloadMu held.
func (m *Manager) begin(ctx context.Context, configs map[string]ServerConfig) {
	names := make([]string, 0, len(configs))
	for name := range configs {
		names = append(names, name)
	}
	slices.Sort(names)
	servers := make([]*server, 0, len(names))
	for _, name := range names {
		s := newServer(m, name, configs[name])
		s.known = m.remembered(ctx, name)
		servers = append(servers, s)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	gen, stop := context.WithCancel(context.WithoutCancel(ctx))
	m.servers, m.stop, m.configErr, m.loaded = servers, stop, "", time.Now()
	m.rebuildLocked()
	m.mu.Unlock()
	for _, s := range servers {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			s.loop(gen)
		}()
	}
}

// end stops the current generation and waits for it. Called with reloadMu
// held.
func (m *Manager) end() {
	m.mu.Lock()
	stop := m.stop
	m.stop = nil
	m.mu.Unlock()
	if stop != nil {
		stop()
	}
	m.wg.Wait()
}

// Tools lists every configured server's tools as they are now, without
// waiting for any server (agent.Provider).
func (m *Manager) Tools() []agent.Tool { return *m.tools.Load() }

// rebuildLocked recomputes the tool list from the servers' states.
func (m *Manager) rebuildLocked() {
	var out []agent.Tool
	for _, s := range m.servers {
		out = append(out, s.toolsLocked()...)
	}
	m.tools.Store(&out)
}

// Status is what /admin shows.
type Status struct {
	File        string // WEFT_MCP_CONFIG ("" : none)
	ConfigError string // why the last reload failed
	Loaded      time.Time
	Servers     []ServerStatus
}

// ServerStatus is one server's state.
type ServerStatus struct {
	Name      string
	Transport string
	State     string // StateConnecting, StateConnected, StateDown
	Since     time.Time
	Tools     []string // the tools it offers now (or last offered)
	Gone      []string // tools it offered earlier but no longer does
	// Skipped names the tools of its last list that were left out, and
	// why (a name that is not a tool name, a schema over the limit).
	Skipped   []string
	LastError string
}

// Status describes the servers for the administrator.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Status{File: m.cfg.File, ConfigError: m.configErr, Loaded: m.loaded}
	for _, s := range m.servers {
		ss := ServerStatus{Name: s.name, Transport: s.cfg.Transport(), State: s.state, Since: s.since, LastError: s.lastErr, Skipped: s.skipped}
		for _, k := range s.known {
			if k.Gone {
				ss.Gone = append(ss.Gone, k.Name)
			} else {
				ss.Tools = append(ss.Tools, k.Name)
			}
		}
		st.Servers = append(st.Servers, ss)
	}
	return st
}

// knownTool is one tool of a server as last listed, kept in the settings
// table under mcp_tools:NAME.
type knownTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	ReadOnly    bool            `json:"read_only,omitempty"`
	// Gone: the server listed it once but no longer does.
	Gone bool `json:"gone,omitempty"`
}

func settingKey(server string) string { return "mcp_tools:" + server }

// remembered is a server's last known tools.
func (m *Manager) remembered(ctx context.Context, server string) []knownTool {
	if m.store == nil {
		return nil
	}
	raw, err := m.store.Setting(ctx, settingKey(server), "")
	if err != nil {
		slog.Warn("mcp: read the last known tools", "server", server, "err", err)
		return nil
	}
	if raw == "" {
		return nil
	}
	var stored []knownTool
	if err := json.Unmarshal([]byte(raw), &stored); err != nil {
		slog.Warn("mcp: the last known tools are unreadable", "server", server, "err", err)
		return nil
	}
	// Kept by an earlier version, perhaps without today's limits.
	var known []knownTool
	for _, k := range stored {
		if len(known) == maxTools+maxGone {
			break
		}
		if toolName.MatchString(k.Name) && len(k.Schema) <= maxSchemaBytes &&
			!slices.ContainsFunc(known, func(x knownTool) bool { return x.Name == k.Name }) {
			k.Description = agent.Clip(k.Description, maxDescRunes)
			known = append(known, k)
		}
	}
	return known
}

// remember stores a server's tools for the next start.
func (m *Manager) remember(ctx context.Context, server string, known []knownTool) {
	if m.store == nil {
		return
	}
	b, err := json.Marshal(known)
	if err == nil {
		err = m.store.SetSetting(ctx, settingKey(server), string(b))
	}
	if err != nil {
		slog.Warn("mcp: keep the last known tools", "server", server, "err", err)
	}
}

// ToolName is the name the model sees for a server's tool.
func ToolName(server, tool string) string { return server + "__" + tool }

// Origin is what every page shows as a server's tools' origin.
func Origin(server string) string { return fmt.Sprintf("MCP server %s", server) }
