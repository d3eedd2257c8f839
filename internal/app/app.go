// Package app is Weft's composition root: the one place that builds the
// users of the database pool — the job queue, the media, knowledge-base,
// agent and chat services — and the HTTP handler, in dependency order, each
// complete when its constructor returns (nothing is connected afterwards).
// The weft command, internal/testenv and the benchmarks all build Weft
// through New, so what runs in tests is what runs in production.
//
// It decides only wiring and the order of start and shutdown; it must
// never hold product logic, read the environment or listen on a port (the
// caller does: main parses configuration, opens the database, migrates it,
// and owns the listeners and signals).
package app

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"path/filepath"
	"time"

	"weft/agent"
	"weft/chat"
	"weft/db"
	"weft/handlers"
	"weft/importer"
	"weft/internal/jobs"
	"weft/mcp"
	"weft/media"
	"weft/rag"
	"weft/sandbox"
)

// Config is what New needs beyond the database.
type Config struct {
	// Ollama is the model servers (OLLAMA_HOST): one, or several that
	// serve as one (chat.Servers), each model by the servers that have it.
	Ollama       []*url.URL
	Servers      chat.ServersConfig // tunes several servers
	DefaultModel string             // WEFT_DEFAULT_MODEL
	MaxCtx       int                // WEFT_MAX_NUM_CTX: the largest num_ctx asked for (0: the models' own)
	// DataDir holds the media blobs and the agent's workspace roots, unless
	// Media.DataDir or Agent.DataDir name other places.
	DataDir string
	// Chat tunes the runtime. Its OllamaHost, Retriever, Agent, Blobs,
	// Answered and Files are the app's to set (UserMaxBytes, when 0, is
	// HTTP.UserMaxBytes); Finalized, when nil, keeps each
	// settled answer's rendering (handlers.StoreRenderings).
	Chat chat.Config
	RAG  rag.Config // its OllamaHost is set from Ollama
	// Import limits imports of other apps' exports (WEFT_IMPORT_MAX_BYTES).
	Import importer.Limits
	Media  media.Config
	Agent  agent.Config
	HTTP   handlers.Config
	// Shell is the sandboxed shell's settings (nil: no run_command tool).
	// The sandbox is checked once here; when it cannot be set up the tool
	// is listed as unavailable with the reason.
	Shell *sandbox.Config
	// Fetch is the agent's web fetch (nil: the real, SSRF-safe one).
	Fetch func(ctx context.Context, url string) (agent.FetchResult, error)
	// MCP is the administrator's MCP servers (WEFT_MCP_CONFIG); with no
	// file and no servers there is no MCP at all.
	MCP mcp.Config
}

// App is a built Weft: every service and the HTTP handler over one store.
type App struct {
	Store   *db.DB
	Servers *chat.Servers // the model servers, when there are several (nil: one)
	Jobs    *jobs.Queue
	Imports *importer.Service
	Media   *media.Service
	RAG     *rag.Service
	Agent   *agent.Agent
	MCP     *mcp.Manager // the MCP servers' tools (nil: none configured)
	RT      *chat.Runtime
	Handler *handlers.Server
}

// New builds Weft over store (already migrated). Nothing runs until Start;
// Close releases what New started even when Start was never called.
func New(store *db.DB, cfg Config) (*App, error) {
	if len(cfg.Ollama) == 0 {
		return nil, errors.New("no model server: set OLLAMA_HOST")
	}
	// One server is its client, exactly; several are one pool.
	var ollama interface {
		chat.Chatter
		chat.Catalog
		rag.Embedder
	}
	var servers *chat.Servers
	host := cfg.Ollama[0].String()
	if len(cfg.Ollama) == 1 {
		ollama = chat.NewOllamaClient(cfg.Ollama[0])
	} else {
		servers = chat.NewServers(cfg.Ollama, cfg.Servers)
		ollama, host = servers, servers.Hosts()
	}
	// Each part has a queue of its own, so that one user's many read-aloud
	// requests cannot starve everyone's uploads.
	queue, err := jobs.New(store.Pool, jobs.Config{Queues: map[string]int{
		rag.Queue:       cfg.RAG.Workers,
		media.Queue:     cfg.Media.Workers,
		agent.HookQueue: 2,
		// Workspaces' receivers are anyone's: one that never answers
		// holds a worker for its timeout.
		agent.WorkspaceHookQueue: 6,
		MemoryQueue:              1, // silent memory extraction (issue 17)
		importer.Queue:           1, // imports of other apps' exports (issue 19): long, one at a time
	}})
	if err != nil {
		return nil, err
	}
	imports, err := importer.New(store, queue, cfg.Import)
	if err != nil {
		return nil, err
	}
	cfg.HTTP.Imports = imports
	if cfg.Media.DataDir == "" {
		cfg.Media.DataDir = cfg.DataDir
	}
	ms, err := media.NewService(store, queue, cfg.Media)
	if err != nil {
		return nil, err
	}
	cfg.RAG.OllamaHost = host
	kb, err := rag.New(store, ollama, queue, cfg.RAG)
	if err != nil {
		return nil, err
	}
	if cfg.Agent.DataDir == "" {
		cfg.Agent.DataDir = cfg.DataDir
	}
	if cfg.Fetch == nil {
		cfg.Fetch = agent.NewFetcher().Fetch
	}
	if cfg.Shell != nil {
		cfg.Agent.ToolTimeout = toolTimeout(cfg.Agent.ToolTimeout, cfg.Shell.Timeout)
	}
	cfg.Agent.Jobs = queue // hook deliveries (Agent.Hooks: WEFT_HOOKS_CONFIG, WEFT_HOOKS_ALLOW)
	ag := agent.New(store, kb, cfg.Fetch, cfg.Agent)
	// Instance skills live beside the workspaces (WEFT_DATA_DIR/skills);
	// each workspace's own, in its .weft/skills, replace them by name.
	ag.AddProvider(agent.NewSkills(filepath.Join(cfg.Agent.DataDir, "skills"), store))
	ag.AddProvider(agent.NewMemory(store)) // remember, forget (issue 17)
	ag.AddProvider(agent.NewWebSearch(kb)) // web_search (issue 19)
	if cfg.Shell != nil {
		sb := sandbox.New(*cfg.Shell)
		if u := sb.Unavailable(); u != "" {
			slog.Warn("the agent's run_command tool is unavailable", "reason", u)
		} else {
			slog.Info("the agent's run_command tool is sandboxed", "walls", sb.Walls())
		}
		ag.AddProvider(sandbox.NewProvider(sb))
	}
	var mc *mcp.Manager
	if cfg.MCP.File != "" || len(cfg.MCP.Servers) > 0 {
		mc = mcp.New(store, cfg.MCP)
		ag.AddProvider(mc)
		cfg.HTTP.MCP = mc
	}
	cfg.Chat.OllamaHost, cfg.Chat.Retriever, cfg.Chat.Agent, cfg.Chat.WebSearch = host, kb, ag, kb
	cfg.Chat.Blobs, cfg.Chat.Answered, cfg.Chat.Files = ms.Blobs, ms.Answered, ms
	mx := &memoryExtractor{store: store, queue: queue}
	if err := mx.register(); err != nil {
		return nil, err
	}
	cfg.Chat.Answered = func(user, thread, msg int64) { ms.Answered(user, thread, msg); mx.answered(user, thread, msg) }
	if cfg.Chat.UserMaxBytes == 0 {
		cfg.Chat.UserMaxBytes = cfg.HTTP.UserMaxBytes
	}
	if cfg.Chat.Finalized == nil {
		cfg.Chat.Finalized = handlers.StoreRenderings(store)
	}
	rt := chat.New(store, ollama, chat.NewModels(ollama, host, cfg.DefaultModel, cfg.MaxCtx), cfg.Chat)
	mx.rt = rt
	srv := handlers.New(cfg.HTTP, store, rt, kb, ag, ms)
	return &App{Store: store, Servers: servers, Jobs: queue, Imports: imports, Media: ms, RAG: kb, Agent: ag, MCP: mc, RT: rt, Handler: srv}, nil
}

// Start begins connecting the MCP servers (in the background: their last
// known tools are listed at once), looks up the single sign-on provider
// (bounded by its timeout; a failure is logged and retried later), recovers the runs of this instance's
// previous life and starts queued ones, then begins working the job queue
// (ingestion and media jobs left by a previous life resume).
func (a *App) Start(ctx context.Context) error {
	if a.Servers != nil {
		a.Servers.Start()
	}
	if a.MCP != nil {
		a.MCP.Start(ctx)
	}
	a.Handler.DiscoverSSO(ctx) // single sign-on, when configured: bounded, never fatal
	if err := a.RT.Start(ctx); err != nil {
		return err
	}
	// Not ctx's cancellation: River takes it as a hard stop, and running
	// jobs should get Shutdown's grace.
	return a.Jobs.Start(context.WithoutCancel(ctx))
}

// jobsGrace is how long running jobs may take to finish at shutdown before
// they are cancelled (they resume on the next start either way).
const jobsGrace = 5 * time.Second

// Shutdown stops in the order that loses the least: answers still running
// get grace to finish (then they become interrupted), running jobs get
// jobsGrace (then they are cancelled), and last the open event streams end
// (browsers reconnect, to another instance if there is one) so the HTTP
// server can drain. ctx must outlive the shutdown signal.
func (a *App) Shutdown(ctx context.Context, grace time.Duration) {
	graceCtx, cancelGrace := context.WithTimeout(ctx, grace)
	a.RT.Shutdown(graceCtx)
	cancelGrace()
	jobsCtx, cancelJobs := context.WithTimeout(ctx, jobsGrace)
	if err := a.Jobs.Stop(jobsCtx); err != nil {
		slog.Warn("ingestion jobs still running after 5 s: cancelling them", "err", err)
		cctx, cancel := context.WithTimeout(ctx, jobsGrace)
		_ = a.Jobs.StopAndCancel(cctx)
		cancel()
	}
	cancelJobs()
	a.Handler.StartShutdown()
}

// Close stops the handler's background work (session clean-up, the stream
// sweep), the reading of the model servers' lists and the MCP servers'
// connections (stdio servers end). Call it after the HTTP server has drained.
func (a *App) Close() {
	a.Handler.Close()
	if a.Servers != nil {
		a.Servers.Close()
	}
	if a.MCP != nil {
		a.MCP.Close()
	}
}

// toolTimeout is the agent's timeout of one tool call (0: its default,
// 60 s) raised, when it would not, past the sandbox's own (0: its
// default): a command may run as long as the administrator allows it,
// plus the time to compare the workspace before and after. Both at 60 s,
// the sandbox ends a command 2 s before the call's deadline (counted from
// before the first comparison), so it got less than the timeout set.
func toolTimeout(agentTimeout, shellTimeout time.Duration) time.Duration {
	if agentTimeout <= 0 {
		agentTimeout = 60 * time.Second // agent.Config's default
	}
	if shellTimeout <= 0 {
		shellTimeout = sandbox.DefaultTimeout
	}
	return max(agentTimeout, shellTimeout+5*time.Second)
}
