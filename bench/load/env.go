package main

import (
	"os/exec"
	"sync/atomic"

	"weft/db"
	"weft/internal/fakeollama"
)

// env is everything the tool starts: Postgres (unless given), the fake
// model (stamping times into its lines, or behind a proxy that does), and Weft as a separate process.
type env struct {
	tmp      string
	dbURL    string
	pg       *db.Embedded
	fake     *fakeollama.Server
	proxy    *stampProxy // nil unless -proxy
	modelURL string      // what weft's OLLAMA_HOST points at
	weft     *exec.Cmd
	weftBase string // http://127.0.0.1:port
	weftLog  string
	pprofURL string // set when weft was built with the profiling overlay

	poolMaxConns int // > 0: pool_max_conns in weft's DATABASE_URL

	streams atomic.Int64 // streamed /api/chat requests the script answered
	titles  atomic.Int64 // non-streamed (title) requests

	cleanups []func()
}

// addCleanup registers f to run (last registered first) when the tool ends.
func (e *env) addCleanup(f func()) { e.cleanups = append(e.cleanups, f) }

func (e *env) close() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	e.cleanups = nil
}
