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
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"weft/db"
	"weft/extract"
	"weft/handlers"
	"weft/internal/app"
	"weft/media"
	"weft/sandbox"
)

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

func main() {
	// A document reader's jailed child, and a sandboxed shell command's,
	// is this binary re-executed: it must confine itself before anything
	// else runs (see packages extract and sandbox).
	extract.ChildMain()
	sandbox.ChildMain()
	if len(os.Args) == 2 && os.Args[1] == "healthcheck" {
		os.Exit(healthcheck(os.Stderr))
	}
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

	store, stopDB, err := openDatabase(ctx, cfg)
	if err != nil {
		return err
	}
	defer stopDB()
	ac := appConfig(cfg)
	if cfg.s3 != nil {
		// Files in a bucket every instance shares; refuse to start when it
		// cannot be reached rather than lose uploads later.
		if ac.Media.Store, err = media.NewS3Blobs(ctx, *cfg.s3); err != nil {
			return err
		}
		slog.Info("files are kept in S3", "endpoint", cfg.s3.Endpoint, "bucket", cfg.s3.Bucket)
	}
	a, err := app.New(store, ac)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.Start(ctx); err != nil {
		return err
	}
	if problem := a.RT.Models().Problem(ctx); problem != "" {
		slog.Warn(problem)
	}
	if err := announceSetupToken(ctx, cfg, store); err != nil {
		return err
	}
	if cfg.metricsAddr != "" {
		stopMetrics, err := serveMetrics(cfg.metricsAddr, a.Handler.Metrics())
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	hs := &http.Server{
		Addr:              cfg.addr,
		Handler:           a.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		// No WriteTimeout: event streams stay open for a whole run; ordinary
		// routes set their own write deadline (handlers.writeDeadline).
	}
	errc := make(chan error, 1)
	go func() {
		slog.Info("weft serving", "addr", "http://"+cfg.addr, "ollama", fmt.Sprint(cfg.ollamaHosts), "instance", cfg.instance)
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
	a.Shutdown(context.Background(), cfg.grace)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// openDatabase opens and migrates the database: DATABASE_URL's, or the
// private cluster under the data directory. The returned function closes
// the pool, then stops the private cluster.
func openDatabase(ctx context.Context, cfg config) (*db.DB, func(), error) {
	if err := os.MkdirAll(cfg.dataDir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("data dir: %w", err)
	}
	stopPG := func() {}
	url := cfg.databaseURL
	if url == "" {
		pgDir := filepath.Join(cfg.dataDir, "postgres")
		slog.Info("no DATABASE_URL: using the private PostgreSQL cluster", "dir", pgDir)
		pg, err := db.StartEmbedded(ctx, pgDir)
		if err != nil {
			return nil, nil, err
		}
		stopPG = func() {
			if err := pg.Stop(context.Background()); err != nil {
				slog.Error("stop embedded postgres", "err", err)
			}
		}
		url = pg.URL
	}
	store, err := db.Open(ctx, url)
	if err != nil {
		stopPG()
		return nil, nil, err
	}
	stop := func() { store.Close(); stopPG() }
	applied, err := store.Migrate(ctx)
	if err != nil {
		stop()
		return nil, nil, err
	}
	slog.Info("database migrated", "applied", applied)
	return store, stop, nil
}

// announceSetupToken logs the one-time token the first account needs when
// Weft is reachable beyond loopback: whoever reaches the port first must
// not become the administrator.
func announceSetupToken(ctx context.Context, cfg config, store *db.DB) error {
	if !needsSetupToken(cfg.addr, cfg.publicURL) {
		return nil
	}
	if cfg.publicURL == nil && !listensOnLoopback(cfg.addr) {
		slog.Warn("WEFT_ADDR listens beyond loopback without WEFT_PUBLIC_URL: only IP addresses and localhost names are accepted as Host; set WEFT_PUBLIC_URL to the URL users reach Weft at")
	}
	token, err := handlers.IssueSetupToken(ctx, store)
	if err != nil {
		return err
	}
	if token != "" {
		slog.Warn("no account exists yet: the first account (the administrator) needs this one-time setup token on /register",
			"setup_token", token)
	}
	return nil
}
