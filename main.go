// Command weft serves Weft, a self-hosted chat workspace for local models.
// It is configured only by environment variables (see README.md); with no
// DATABASE_URL it runs a private PostgreSQL cluster under WEFT_DATA_DIR.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ollama/ollama/envconfig"

	"weft/agent"
	"weft/chat"
	"weft/db"
	"weft/extract"
	"weft/handlers"
	"weft/media"
	"weft/rag"
)

type config struct {
	addr         string
	databaseURL  string
	dataDir      string
	ollamaHost   *url.URL
	defaultModel string
	instance     string
	maxCtx       int
	userRuns     int
	grace        time.Duration
	tlsCert      string
	tlsKey       string
	logFormat    string
	maxBody      int64
	compactAt    float64
	embedModel   string
	kbFileBytes  int64
	uploadBytes  int64
	attachBytes  int64
	attachFiles  int
	extractors   int
	publicURL    *url.URL
	metricsAddr  string
	metricsToken string
	maxStreams   int
	signupLimit  int
	mediaWorkers int
	mediaPending int
	userBytes    int64
}

func loadConfig() (config, error) {
	c := config{
		addr:         env("WEFT_ADDR", "127.0.0.1:8080"),
		databaseURL:  os.Getenv("DATABASE_URL"),
		dataDir:      env("WEFT_DATA_DIR", "./data"),
		ollamaHost:   envconfig.Host(), // OLLAMA_HOST, read the way Ollama reads it
		defaultModel: os.Getenv("WEFT_DEFAULT_MODEL"),
		instance:     os.Getenv("WEFT_INSTANCE_ID"),
		tlsCert:      os.Getenv("WEFT_TLS_CERT"),
		tlsKey:       os.Getenv("WEFT_TLS_KEY"),
		logFormat:    env("WEFT_LOG_FORMAT", "text"),
		embedModel:   env("WEFT_EMBED_MODEL", "nomic-embed-text"),
		metricsAddr:  os.Getenv("WEFT_METRICS_ADDR"),
		metricsToken: os.Getenv("WEFT_METRICS_TOKEN"),
	}
	var err error
	if v := os.Getenv("WEFT_PUBLIC_URL"); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return c, fmt.Errorf("WEFT_PUBLIC_URL must be an http:// or https:// URL with a host name, got %q", v)
		}
		c.publicURL = u
	}
	if c.maxStreams, err = envInt("WEFT_MAX_STREAMS_PER_USER", 20, 1); err != nil {
		return c, err
	}
	if c.signupLimit, err = envInt("WEFT_SIGNUP_LIMIT", 10, 0); err != nil {
		return c, err
	}
	if c.maxBody, err = envInt[int64]("WEFT_MAX_BODY_BYTES", 1<<20, 1024); err != nil {
		return c, err
	}
	if c.kbFileBytes, err = envInt[int64]("WEFT_KB_MAX_FILE_BYTES", 50<<20, 1024); err != nil {
		return c, err
	}
	if c.uploadBytes, err = envInt[int64]("WEFT_KB_MAX_UPLOAD_BYTES", 512<<20, 1024); err != nil {
		return c, err
	}
	if c.attachBytes, err = envInt[int64]("WEFT_ATTACH_MAX_BYTES", 8<<20, 1024); err != nil {
		return c, err
	}
	if c.attachFiles, err = envInt("WEFT_ATTACH_MAX_FILES", 10, 1); err != nil {
		return c, err
	}
	if c.userBytes, err = envInt[int64]("WEFT_USER_MAX_BYTES", 1<<30, 1024); err != nil {
		return c, err
	}
	if c.mediaWorkers, err = envInt("WEFT_MEDIA_WORKERS", 2, 1); err != nil {
		return c, err
	}
	if c.mediaPending, err = envInt("WEFT_MAX_MEDIA_JOBS_PER_USER", 5, 1); err != nil {
		return c, err
	}
	if c.extractors, err = envInt("WEFT_EXTRACT_WORKERS", extract.DefaultWorkers, 1); err != nil {
		return c, err
	}
	if c.maxCtx, err = envInt("WEFT_MAX_NUM_CTX", 8192, 256); err != nil {
		return c, err
	}
	if c.userRuns, err = envInt("WEFT_MAX_RUNS_PER_USER", 3, 1); err != nil {
		return c, err
	}
	c.compactAt = 0.85
	if v := os.Getenv("WEFT_COMPACT_AT"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			return c, fmt.Errorf("WEFT_COMPACT_AT must be a number above 0 and at most 1 (the context fill that triggers a summary), got %q", v)
		}
		c.compactAt = f
	}
	grace, err := envInt("WEFT_SHUTDOWN_GRACE_SECONDS", 10, 0)
	if err != nil {
		return c, err
	}
	c.grace = time.Duration(grace) * time.Second
	if c.instance == "" {
		// Stable across restarts of this process on this host and address, so
		// that a restart recognises (and interrupts) the runs of its old life.
		host, _ := os.Hostname()
		c.instance = host + "/" + c.addr
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return c, errors.New("set both WEFT_TLS_CERT and WEFT_TLS_KEY, or neither")
	}
	return c, nil
}

func envInt[T int | int64](key string, def, min T) (T, error) {
	v := os.Getenv(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || T(n) < min {
		return def, fmt.Errorf("%s must be a whole number ≥ %d, got %q", key, min, v)
	}
	return T(n), nil
}

// listensOnLoopback reports whether addr (WEFT_ADDR) is reachable only from
// this machine: a loopback IP or "localhost". An empty host or a wildcard
// listens on every interface.
// needsSetupToken tells whether the first account must prove it read the
// log: when Weft listens beyond loopback, or is published under a public
// name (a proxy in front of a loopback listener), whoever reaches it first
// must not become the administrator.
func needsSetupToken(addr string, public *url.URL) bool {
	return !listensOnLoopback(addr) || (public != nil && !listensOnLoopback(public.Hostname()))
}

func listensOnLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// serveMetrics serves /metrics alone on its own address (an operator's
// network, not the users'); the returned function stops it.
func serveMetrics(addr string, h http.Handler) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("WEFT_METRICS_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		if err := ms.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("metrics listener stopped", "err", err)
		}
	}()
	slog.Info("metrics served separately", "addr", "http://"+ln.Addr().String()+"/metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = ms.Shutdown(ctx)
	}, nil
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func main() {
	// A document reader's jailed child is this binary re-executed: it must
	// confine itself before anything else runs (see package extract).
	extract.ChildMain()
	cfg, err := loadConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "weft:", err)
		os.Exit(2)
	}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if cfg.logFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, nil)
	}
	slog.SetDefault(slog.New(h))
	extract.Configure(extract.JailConfig{Workers: cfg.extractors})
	if err := run(cfg); err != nil {
		slog.Error("weft stopped", "err", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if err := os.MkdirAll(cfg.dataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	url := cfg.databaseURL
	if url == "" {
		pgDir := filepath.Join(cfg.dataDir, "postgres")
		slog.Info("no DATABASE_URL: using the private PostgreSQL cluster", "dir", pgDir)
		pg, err := db.StartEmbedded(ctx, pgDir)
		if err != nil {
			return err
		}
		defer func() {
			if err := pg.Stop(context.Background()); err != nil {
				slog.Error("stop embedded postgres", "err", err)
			}
		}()
		url = pg.URL
	}
	store, err := db.Open(ctx, url)
	if err != nil {
		return err
	}
	defer store.Close()
	applied, err := store.Migrate(ctx)
	if err != nil {
		return err
	}
	slog.Info("database migrated", "applied", applied)

	host := cfg.ollamaHost.String()
	ollama := chat.NewOllamaClient(cfg.ollamaHost)
	ms := media.NewService(store, media.Config{DataDir: cfg.dataDir,
		Limits:  media.Limits{MaxFileBytes: cfg.attachBytes, MaxFiles: cfg.attachFiles},
		Workers: cfg.mediaWorkers, MaxPendingPerUser: cfg.mediaPending})
	kb, err := rag.New(store, ollama, rag.Config{OllamaHost: host, MaxFileBytes: cfg.kbFileBytes,
		Register: ms.Register, Periodic: ms.Periodic(), Queues: ms.Queues()})
	if err != nil {
		return err
	}
	ms.SetQueue(kb)
	ag := agent.New(store, kb, agent.NewFetcher().Fetch, agent.Config{DataDir: cfg.dataDir})
	rt := chat.New(store, ollama, chat.NewModels(ollama, host, cfg.defaultModel, cfg.maxCtx), chat.Config{
		Instance: cfg.instance, OllamaHost: host, PerUserRuns: cfg.userRuns, CompactAt: cfg.compactAt, Retriever: kb,
		Agent: ag, Blobs: ms.Blobs, Answered: ms.Answered, Finalized: handlers.StoreRenderings(store), Files: ms, UserMaxBytes: cfg.userBytes,
	})
	if err := rt.Start(ctx); err != nil {
		return err
	}
	// Ingestion jobs left by a previous life resume here. Not the signal
	// context: River takes its cancellation as a hard stop, and running jobs
	// should get the grace below.
	if err := kb.Start(context.Background()); err != nil {
		return err
	}
	if problem := rt.Models().Problem(ctx); problem != "" {
		slog.Warn(problem)
	}
	if needsSetupToken(cfg.addr, cfg.publicURL) {
		if cfg.publicURL == nil && !listensOnLoopback(cfg.addr) {
			slog.Warn("WEFT_ADDR listens beyond loopback without WEFT_PUBLIC_URL: only IP addresses and localhost names are accepted as Host; set WEFT_PUBLIC_URL to the URL users reach Weft at")
		}
		// Beyond loopback, whoever reaches the port first must not become
		// the administrator: the first account needs this token.
		token, err := handlers.IssueSetupToken(ctx, store)
		if err != nil {
			return err
		}
		if token != "" {
			slog.Warn("no account exists yet: the first account (the administrator) needs this one-time setup token on /register",
				"setup_token", token)
		}
	}
	srv := handlers.New(handlers.Config{
		SecureCookies:     cfg.tlsCert != "",
		MaxBodyBytes:      cfg.maxBody,
		MaxUploadBytes:    cfg.uploadBytes,
		EmbedModel:        cfg.embedModel,
		PublicURL:         cfg.publicURL,
		ListenAddr:        cfg.addr,
		MetricsElsewhere:  cfg.metricsAddr != "",
		MetricsToken:      cfg.metricsToken,
		MaxStreamsPerUser: cfg.maxStreams,
		SignupLimit:       cfg.signupLimit,
		UserMaxBytes:      cfg.userBytes,
	}, store, rt, kb, ag, ms)
	defer srv.Close()
	if cfg.metricsAddr != "" {
		stopMetrics, err := serveMetrics(cfg.metricsAddr, srv.Metrics())
		if err != nil {
			return err
		}
		defer stopMetrics()
	}

	hs := &http.Server{
		Addr:              cfg.addr,
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		// No WriteTimeout: event streams stay open for a whole run; ordinary
		// routes set their own write deadline (handlers.writeDeadline).
	}
	errc := make(chan error, 1)
	go func() {
		slog.Info("weft serving", "addr", "http://"+cfg.addr, "ollama", host, "instance", cfg.instance)
		if cfg.tlsCert != "" {
			errc <- hs.ListenAndServeTLS(cfg.tlsCert, cfg.tlsKey)
		} else {
			errc <- hs.ListenAndServe()
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	slog.Info("shutting down: finishing answers", "grace", cfg.grace)
	graceCtx, cancelGrace := context.WithTimeout(context.Background(), cfg.grace)
	rt.Shutdown(graceCtx) // answers still running after the grace become interrupted
	cancelGrace()
	jobsCtx, cancelJobs := context.WithTimeout(context.Background(), 5*time.Second)
	if err := kb.Stop(jobsCtx); err != nil { // unfinished ingestion resumes on the next start
		slog.Warn("ingestion jobs still running after 5 s: cancelling them", "err", err)
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = kb.StopAndCancel(cctx)
		cancel()
	}
	cancelJobs()
	srv.StartShutdown() // open event streams end; browsers reconnect elsewhere
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
