package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

const clkTck = 100 // USER_HZ on Linux

// statFields returns /proc/pid/stat from the state field on (index 0 is
// field 3 of proc(5)).
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("bad stat")
	}
	return strings.Fields(string(b[i+1:])), nil
}

func ticks(f []string, i int) float64 {
	if i >= len(f) {
		return 0
	}
	v, _ := strconv.ParseFloat(f[i], 64)
	return v / clkTck
}

// cpuSeconds is utime+stime of pid.
func cpuSeconds(pid int) float64 {
	f, err := statFields(pid)
	if err != nil {
		return 0
	}
	return ticks(f, 11) + ticks(f, 12)
}

// memKB reads VmRSS and VmHWM (kB) of pid.
func memKB(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	return rss, hwm
}

// memDetail is VmRSS split into anonymous memory (heap, stacks) and file
// pages (the mapped binary), from /proc/pid/status.
func memDetail(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	var parts []string
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "RssAnon" || k == "RssFile" || k == "RssShmem") {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			parts = append(parts, fmt.Sprintf("%s %.1f MB", k, float64(n)/1024))
		}
	}
	return strings.Join(parts, ", ")
}

// resetHWM sets VmHWM back to the current RSS (proc(5), clear_refs "5").
func resetHWM(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

func (e *env) pid() int { return e.weft.Process.Pid }

// sampler polls weft's RSS and the fake's active streams while a phase runs.
type sampler struct {
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	maxRSS  int64
	maxLive int
}

func (e *env) sample(every time.Duration) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			rss, _ := memKB(e.pid())
			live := e.fake.ActiveStreams()
			s.mu.Lock()
			s.maxRSS = max(s.maxRSS, rss)
			s.maxLive = max(s.maxLive, live)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) finish() (maxRSSKB int64, maxLive int) {
	close(s.stop)
	<-s.done
	return s.maxRSS, s.maxLive
}

// goMetrics scrapes a few of weft's own /metrics gauges.
func (e *env) goMetrics(ctx context.Context) map[string]float64 {
	out := map[string]float64{}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.weftBase+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	want := map[string]bool{
		"go_goroutines": true, "go_memstats_heap_inuse_bytes": true, "go_memstats_heap_sys_bytes": true,
		"go_memstats_heap_idle_bytes": true, "go_memstats_heap_released_bytes": true, "go_memstats_sys_bytes": true,
		"go_memstats_next_gc_bytes": true, "process_resident_memory_bytes": true, "process_open_fds": true,
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// settle waits until the fake has served at least the given number of
// streamed requests and nothing has reached or been served by it for 300 ms
// (title requests follow a run's end), bounded by timeout.
func (e *env) settle(streams int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	var quietSince time.Time
	lastS, lastT := int64(-1), int64(-1)
	for time.Now().Before(deadline) {
		s, t := e.streams.Load(), e.titles.Load()
		if e.fake.ActiveStreams() != 0 || s < streams || s != lastS || t != lastT {
			quietSince = time.Time{}
			lastS, lastT = s, t
		} else if quietSince.IsZero() {
			quietSince = time.Now()
		} else if time.Since(quietSince) >= 300*time.Millisecond {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// machineBusy is the busy CPU time of the whole machine (every CPU, every
// process) from /proc/stat.
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	busy := 0.0
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest time is already in user
			break
		}
		n, _ := strconv.ParseFloat(v, 64)
		busy += n
	}
	return busy / clkTck
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuMark is a reading of who used the CPUs, to show what else ran on the
// machine during a measurement.
type cpuMark struct {
	at                      time.Time
	weft, pg, tool, machine float64
}

func (e *env) mark() cpuMark {
	return cpuMark{at: time.Now(), weft: cpuSeconds(e.pid()), pg: e.postgresCPU(), tool: cpuSeconds(os.Getpid()), machine: machineBusy()}
}

// since describes CPU use from m to now.
func (e *env) since(m cpuMark) string {
	n := e.mark()
	wall := n.at.Sub(m.at).Seconds()
	weft, pg, tool, all := n.weft-m.weft, n.pg-m.pg, n.tool-m.tool, n.machine-m.machine
	return fmt.Sprintf("CPU over %.1f s wall: weft %.2f s, postgres %.2f s, tool %.2f s, other processes %.2f s; machine busy %.0f%% of %d CPUs; load average %s",
		wall, weft, pg, tool, max(0, all-weft-pg-tool), 100*all/(wall*float64(runtime.NumCPU())), runtime.NumCPU(), loadAvg())
}
