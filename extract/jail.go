package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// JailConfig sets the limits of the jail's children; zero fields take the
// defaults.
type JailConfig struct {
	// Workers bounds the children alive at once on this instance
	// (default 2, WEFT_EXTRACT_WORKERS): each may use up to Memory.
	Workers int
	// Memory is the address space a child may add to what the Go runtime
	// reserved at its start (RLIMIT_AS, default 1 GiB); its GC aims at
	// three quarters of it (debug.SetMemoryLimit).
	Memory int64
	// CPU is the processor time a child may use (RLIMIT_CPU, default 10 s:
	// DESIGN §13 allows one input 10 s of one core).
	CPU time.Duration
	// Timeout is the wall-clock time a child may run, waiting for a slot
	// not included (default 60 s: a loaded machine may give a child
	// much less than a core).
	Timeout time.Duration
	// MaxOutput caps what a child may write back (default 256 MiB: 20
	// million characters of text as JSON blocks fit).
	MaxOutput int64
}

// Defaults of JailConfig.
const (
	DefaultWorkers   = 2
	DefaultMemory    = 1 << 30
	DefaultCPU       = 10 * time.Second
	DefaultTimeout   = 60 * time.Second
	DefaultMaxOutput = 256 << 20
)

func (c JailConfig) withDefaults() JailConfig {
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.Memory <= 0 {
		c.Memory = DefaultMemory
	}
	if c.CPU <= 0 {
		c.CPU = DefaultCPU
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxOutput <= 0 {
		c.MaxOutput = DefaultMaxOutput
	}
	return c
}

// Jail runs readers in child processes, at most Workers at a time.
type Jail struct {
	cfg   JailConfig
	slots chan struct{}

	running atomic.Int64 // children alive
	waiting atomic.Int64 // calls waiting for a slot
	// started, when set (tests), is called with a child alive, before its
	// output is read.
	started func()
}

// NewJail returns a jail with the given limits.
func NewJail(cfg JailConfig) *Jail {
	cfg = cfg.withDefaults()
	return &Jail{cfg: cfg, slots: make(chan struct{}, cfg.Workers)}
}

var (
	defaultMu   sync.Mutex
	defaultJail *Jail
)

// Configure sets the limits of the default jail used by Read and
// Thumbnail; main calls it once at start. Without it the defaults apply.
func Configure(cfg JailConfig) {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	defaultJail = NewJail(cfg)
}

// Default is the jail of Read and Thumbnail.
func Default() *Jail {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	if defaultJail == nil {
		defaultJail = NewJail(JailConfig{})
	}
	return defaultJail
}

// Running is how many of the jail's children are alive.
func (j *Jail) Running() int { return int(j.running.Load()) }

var landlockOnce sync.Once

// logLandlock says once, in the server's log, when the kernel cannot
// confine the children's file and network access: they are then bounded
// by their resource limits only.
func logLandlock() {
	landlockOnce.Do(func() {
		abi, err := llsys.LandlockGetABIVersion()
		switch {
		case err != nil || abi < 1:
			slog.Warn("extract: this kernel has no Landlock; document readers run with resource limits but can open files and connect", "err", err)
		case abi < 4:
			slog.Warn("extract: this kernel's Landlock cannot restrict the network; document readers can connect", "abi", abi)
		}
	})
}

// stderrCap is how much of a child's stderr is kept for the log.
const stderrCap = 16 << 10

// run starts a child for op, gives it data on stdin and returns its
// answer; what is refers to the file in messages ("This PDF").
func (j *Jail) run(ctx context.Context, what string, data []byte, op string, args ...string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("extract: %w", err)
	}
	logLandlock()
	j.waiting.Add(1)
	select {
	case j.slots <- struct{}{}:
		j.waiting.Add(-1)
	case <-ctx.Done():
		j.waiting.Add(-1)
		return nil, ctx.Err()
	}
	defer func() { <-j.slots }()

	runCtx, cancel := context.WithTimeoutCause(ctx, j.cfg.Timeout, ErrJailTimeout)
	defer cancel()
	argv := append([]string{childArg, op,
		strconv.FormatInt(j.cfg.Memory, 10), strconv.Itoa(int(max(1, j.cfg.CPU/time.Second)))}, args...)
	cmd := exec.CommandContext(runCtx, exe, argv...)
	// A clean environment: nothing of the server's (secrets, DATABASE_URL)
	// reaches code that parses hostile input.
	cmd.Env = []string{"GOMAXPROCS=1", "GOTRACEBACK=single"}
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(data)
	var stderr capBuffer
	stderr.max = stderrCap
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("extract: %w", err)
	}
	// Its own process group, killed whole; and killed with the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("extract: start the reader: %w", err)
	}
	j.running.Add(1)
	defer j.running.Add(-1)
	if j.started != nil {
		j.started()
	}
	out, rerr := io.ReadAll(io.LimitReader(stdout, j.cfg.MaxOutput+1))
	tooMuch := int64(len(out)) > j.cfg.MaxOutput
	if tooMuch {
		_ = cmd.Cancel()
	}
	werr := cmd.Wait()

	switch {
	case tooMuch:
		return nil, &ReadError{Msg: what + " gives more text than Weft keeps for one file; split it into smaller files.", Err: ErrTooLarge}
	case context.Cause(runCtx) == ErrJailTimeout:
		j.logChild("timed out", op, werr, &stderr)
		return nil, jailError(what, ErrJailTimeout)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	if werr != nil {
		reason := j.classify(cmd.ProcessState, stderr.String())
		j.logChild("failed", op, werr, &stderr)
		return nil, jailError(what, reason)
	}
	if rerr != nil {
		return nil, fmt.Errorf("extract: read the reader's answer: %w", rerr)
	}
	if len(out) == 0 {
		j.logChild("answered nothing", op, nil, &stderr)
		return nil, jailError(what, ErrJailCrashed)
	}
	switch out[0] {
	case statusOK:
		return out[1:], nil
	case statusErr:
		var ce childError
		if err := json.Unmarshal(out[1:], &ce); err != nil {
			return nil, fmt.Errorf("extract: the reader's error: %w", err)
		}
		return nil, ce.err()
	}
	return nil, jailError(what, ErrJailCrashed)
}

// classify tells why a child exited badly: the Go runtime's fatal errors
// for memory (an allocation over RLIMIT_AS, a stack over its maximum), the
// CPU limit's SIGKILL, or anything else (a signal, a fatal error, a
// nonzero exit) as a crash.
func (j *Jail) classify(ps *os.ProcessState, stderr string) error {
	if strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "stack overflow") ||
		strings.Contains(stderr, "cannot allocate memory") {
		return ErrJailMemory
	}
	if ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() &&
			(ws.Signal() == syscall.SIGKILL || ws.Signal() == syscall.SIGXCPU) &&
			// The kernel's CPU accounting and rusage's differ by a tick or
			// two; a SIGKILL the parent did not send, after most of the
			// limit, is the limit.
			ps.UserTime()+ps.SystemTime() >= j.cfg.CPU.Truncate(time.Second)*3/4 {
			return ErrJailTimeout
		}
	}
	return ErrJailCrashed
}

func (j *Jail) logChild(what, op string, err error, stderr *capBuffer) {
	slog.Warn("extract: a reader "+what, "op", op, "err", err, "stderr", firstLines(stderr.String(), 6))
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(len(lines), n)], "\n")
}

// jailError is the user's message for a child the jail stopped.
func jailError(what string, reason error) error {
	var msg string
	switch reason {
	case ErrJailMemory:
		msg = what + " could not be read: it needs more memory than Weft allows for one file."
	case ErrJailTimeout:
		msg = what + " could not be read: it took too long to read."
	default:
		msg = what + " could not be read: it made the reader crash."
	}
	return &ReadError{Msg: msg, Err: reason}
}

// capBuffer keeps the first max bytes written to it and drops the rest.
type capBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	max int
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - c.b.Len(); room > 0 {
		c.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}
