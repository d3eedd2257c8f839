package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// The floor of the relay cost on this machine: what the least a Go program
// can do per token costs when tokens arrive one by one. A child process
// (this tool, run with -floor-child) reads a paced NDJSON stream from the
// tool over HTTP, one line per token as Ollama sends them, and either only
// reads it ("read") or also writes and flushes every line to an HTTP
// response the tool reads ("relay": what weft must do at least). The child
// measures its own CPU (getrusage, microseconds) from its first request to
// its last line. Weft's relay cost per token is comparable to the relay
// floor at the same pace; the difference is weft's own work.

// floorLine is the shape of a streamed Ollama line.
const floorLine = `{"model":"m","created_at":"2026-12-02T00:00:00Z","message":{"role":"assistant","content":"tok%d "},"done":false}` + "\n"

type floorResult struct {
	Lines int     `json:"lines"`
	CPUus float64 `json:"cpu_us"`
}

// floorChild is the child's main: mode "read" or "relay", source the
// tool's paced stream. It serves one request on a local port (printed on
// stdout) and exits after it; the result goes to stderr as JSON.
func floorChild(mode, source string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println("http://" + ln.Addr().String())
	done := make(chan floorResult, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c0 := rusageMicros()
		resp, err := http.Get(source)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			done <- floorResult{} // the parent sees 0 lines
			return
		}
		defer resp.Body.Close()
		rc := http.NewResponseController(w)
		br := bufio.NewReaderSize(resp.Body, 16<<10)
		n := 0
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				break
			}
			n++
			if mode == "relay" {
				// What an event stream does per token: frame, write, flush.
				if _, err := fmt.Fprintf(w, "event: delta\ndata: %s\n", line[:len(line)-1]); err != nil {
					break
				}
				if err := rc.Flush(); err != nil {
					break
				}
			}
		}
		done <- floorResult{Lines: n, CPUus: rusageMicros() - c0}
	})}
	go srv.Serve(ln)
	res := <-done
	// Let the response end before exiting (Shutdown waits for it).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return err
	}
	return json.NewEncoder(os.Stderr).Encode(res)
}

func rusageMicros() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

// floorOnce runs one child and returns its CPU per line in µs.
func floorOnce(ctx context.Context, mode string, lines int, gap time.Duration) (float64, error) {
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		rc := http.NewResponseController(w)
		for i := range lines {
			t := time.NewTimer(gap)
			select {
			case <-r.Context().Done():
				t.Stop()
				return
			case <-t.C:
			}
			fmt.Fprintf(w, floorLine, i)
			if rc.Flush() != nil {
				return
			}
		}
	}))
	defer src.Close()
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, self, "-floor-child", mode, "-floor-source", src.URL)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("floor child: %v (%s)", err, stderr.String())
	}
	resp, err := http.Get(strings.TrimSpace(url))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return 0, fmt.Errorf("floor child answered %s", resp.Status)
	}
	got, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	if err := cmd.Wait(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return 0, fmt.Errorf("floor child: %v (%s)", err, stderr.String())
	}
	var res floorResult
	if err := json.Unmarshal([]byte(stderr.String()), &res); err != nil {
		return 0, fmt.Errorf("floor child said %q: %v", stderr.String(), err)
	}
	if res.Lines != lines || (mode == "relay" && got == 0) {
		return 0, fmt.Errorf("floor child read %d of %d lines (relayed %d bytes)", res.Lines, lines, got)
	}
	return res.CPUus / float64(lines), nil
}

// floor measures the four floors and returns the relay floor at 1 ms and
// at 20 ms between tokens.
func (b *bench) floor(ctx context.Context) (at1ms, at20ms float64, err error) {
	r := b.r
	r.printf("")
	r.printf("floor on this machine (a bare Go process, CPU by getrusage): per token, one Ollama NDJSON line read from a paced")
	r.printf("HTTP stream (\"read\"), or read and written + flushed to an HTTP response (\"relay\", the least weft must do):")
	for _, c := range []struct {
		mode  string
		lines int
		gap   time.Duration
	}{{"read", 2000, time.Millisecond}, {"relay", 2000, time.Millisecond}, {"read", 500, 20 * time.Millisecond}, {"relay", 500, 20 * time.Millisecond}} {
		us, err := floorOnce(ctx, c.mode, c.lines, c.gap)
		if err != nil {
			return 0, 0, err
		}
		r.printf("  %-5s a token every %-5s (%d tokens): %6.1f µs per token", c.mode, c.gap, c.lines, us)
		if c.mode == "relay" && c.gap == time.Millisecond {
			at1ms = us
		}
		if c.mode == "relay" && c.gap > time.Millisecond {
			at20ms = us
		}
	}
	return at1ms, at20ms, nil
}
