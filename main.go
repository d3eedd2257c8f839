// Command weft serves Weft, a self-hosted chat workspace for local models.
// It is configured only by environment variables (see README.md); with no
// DATABASE_URL it runs a private PostgreSQL cluster under WEFT_DATA_DIR.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"weft/chat"
	"weft/db"
	"weft/handlers"
)

type config struct {
	addr         string
	databaseURL  string
	dataDir      string
	ollamaHost   string
	defaultModel string
	tlsCert      string
	tlsKey       string
	logFormat    string
	maxBody      int64
}

func loadConfig() (config, error) {
	c := config{
		addr:         env("WEFT_ADDR", "127.0.0.1:8080"),
		databaseURL:  os.Getenv("DATABASE_URL"),
		dataDir:      env("WEFT_DATA_DIR", "./data"),
		ollamaHost:   env("OLLAMA_HOST", "http://127.0.0.1:11434"),
		defaultModel: os.Getenv("WEFT_DEFAULT_MODEL"),
		tlsCert:      os.Getenv("WEFT_TLS_CERT"),
		tlsKey:       os.Getenv("WEFT_TLS_KEY"),
		logFormat:    env("WEFT_LOG_FORMAT", "text"),
		maxBody:      1 << 20,
	}
	if v := os.Getenv("WEFT_MAX_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1024 {
			return c, fmt.Errorf("WEFT_MAX_BODY_BYTES must be a number of bytes ≥ 1024, got %q", v)
		}
		c.maxBody = n
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return c, errors.New("set both WEFT_TLS_CERT and WEFT_TLS_KEY, or neither")
	}
	return c, nil
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func main() {
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

	srv := handlers.New(handlers.Config{
		DefaultModel:  cfg.defaultModel,
		SecureCookies: cfg.tlsCert != "",
		MaxBodyBytes:  cfg.maxBody,
	}, store, chat.New(store))
	defer srv.Close()

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
		slog.Info("weft serving", "addr", "http://"+cfg.addr, "ollama", cfg.ollamaHost)
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
	slog.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
