package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
)

// for -pprof builds); stopProfile ends it.
func (b *bench) startProfile(ctx context.Context, name string) {
	if b.e.pprofURL == "" {
		return
	}
	if err := os.MkdirAll(b.cfg.profileDir, 0o755); err != nil {
		b.r.printf("profile: %v", err)
		return
	}
	file := filepath.Join(b.cfg.profileDir, "cpu-"+name+".pprof")
	if err := b.pprofGet(ctx, "/bench/cpu/start?file="+url.QueryEscape(file), ""); err != nil {
		b.r.printf("profile: %v", err)
	}
}

func (b *bench) stopProfile(ctx context.Context) {
	if b.e.pprofURL == "" {
		return
	}
	if err := b.pprofGet(ctx, "/bench/cpu/stop", ""); err != nil {
		b.r.printf("profile: %v", err)
	}
}

// heapProfile saves weft's heap profile (only for -pprof builds).
func (b *bench) heapProfile(ctx context.Context, name string) error {
	if b.e.pprofURL == "" {
		return nil
	}
	return b.pprofGet(ctx, "/debug/pprof/heap", filepath.Join(b.cfg.profileDir, "heap-"+name+".pprof"))
}

func (b *bench) pprofGet(ctx context.Context, path, file string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.e.pprofURL+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %d %s", path, resp.StatusCode, msg)
	}
	if file == "" {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}
