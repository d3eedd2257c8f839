// Package sandbox runs shell commands for the agent's run_command tool, in
// a child of the weft binary that confines itself before it execs /bin/sh:
// new user (when it can), mount, PID, network, IPC and UTS namespaces; no
// network (an empty network namespace, and Landlock denying TCP bind and
// connect); the workspace read-write, system directories read-only and
// nothing else (Landlock); a private /tmp and /proc; resource limits (CPU
// seconds, memory, processes, file size); no capabilities, and a seccomp
// filter against getting them back (no new user namespace, no
// set-user-ID bit); a scrubbed environment and no inherited descriptor; a
// wall-clock timeout, a disk reserve, an output bound and Stop that kill
// the whole process group and PID namespace; and the output capped, head
// and tail. It
// reports which workspace files a command created, modified or deleted by
// comparing the workspace before and after.
//
// It never runs a command without confinement: when the walls cannot be
// set up on this server (checked once, at New), the tool is listed as
// unavailable with the reason.
package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"weft/agent"
)

// Config sets the limits of a command; zero fields take the defaults.
type Config struct {
	// Off turns the shell off (WEFT_SHELL=off): the tool is listed as
	// unavailable.
	Off bool
	// CPU is the processor time each process of a command may use
	// (RLIMIT_CPU, default 30 s).
	CPU time.Duration
	// Memory is the data memory each process may use (RLIMIT_DATA,
	// default 512 MiB).
	Memory int64
	// Processes bounds the processes and threads alive at once
	// (RLIMIT_NPROC, and the PID namespace's pid_max; default 64).
	Processes int
	// FileSize is the largest file a command may write (RLIMIT_FSIZE,
	// default 64 MiB); it also sizes the private /tmp.
	FileSize int64
	// Timeout is the wall-clock time a command may run (default 60 s).
	Timeout time.Duration
	// Output is how much of a command's output is kept, per stream, half
	// from its start and half from its end (default 64 KiB).
	Output int
	// MaxFiles bounds the workspace entries compared before and after a
	// command (default 20,000); past it the changes are not all known and
	// the result says so.
	MaxFiles int
	// Workers bounds the commands running at once on this instance
	// (default 4); more wait for a slot, within their tool's timeout.
	Workers int
	// DiskReserve is the space the workspace's file system keeps free: a
	// command is killed when less is left (checked every diskEvery) and
	// none starts then. Default: the larger of 2 GiB and 5 % of the file
	// system; its inodes keep the larger of 50,000 and 5 % likewise.
	// RLIMIT_FSIZE bounds one file only: without it a command writes
	// some 1.5 GB a second into the page cache, and files by the million.
	DiskReserve int64
}

// Defaults of Config.
const (
	DefaultCPU       = 30 * time.Second
	DefaultMemory    = 512 << 20
	DefaultProcesses = 64
	DefaultFileSize  = 64 << 20
	DefaultTimeout   = 60 * time.Second
	DefaultOutput    = 64 << 10
	DefaultMaxFiles  = 20000
	DefaultWorkers   = 4
)

func (c Config) withDefaults() Config {
	if c.CPU <= 0 {
		c.CPU = DefaultCPU
	}
	if c.Memory <= 0 {
		c.Memory = DefaultMemory
	}
	if c.Processes <= 0 {
		c.Processes = DefaultProcesses
	}
	if c.FileSize <= 0 {
		c.FileSize = DefaultFileSize
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Output <= 0 {
		c.Output = DefaultOutput
	}
	if c.MaxFiles <= 0 {
		c.MaxFiles = DefaultMaxFiles
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	return c
}

// Sandbox runs commands confined; build it with New.
type Sandbox struct {
	cfg   Config
	exe   string
	slots chan struct{} // one per command running
	// userNS: commands get a user namespace of their own (root inside
	// maps to the server's uid). Without it (a root server where user
	// namespaces are refused) the child is still stripped of every
	// capability before it execs the shell.
	userNS bool
	// hide: the child builds a root of its own (see buildRoot); without
	// it Landlock alone keeps the rest of the file system out of reach.
	hide bool
	// unavailable is why commands cannot run here ("" when they can).
	unavailable string
	// walls describes what the self-test found to hold, for the log.
	walls string

	// started, when set (tests), is called with the child's pid once it
	// runs.
	started func(pid int)
}

// New checks that the sandbox can be set up on this server — it runs the
// child once, which confines itself and then tries each wall — and returns
// it; Unavailable says why not when it cannot.
func New(cfg Config) *Sandbox {
	exe, err := os.Executable()
	return newAt(cfg, exe, err)
}

// newAt is New for the child executable exe.
func newAt(cfg Config, exe string, err error) *Sandbox {
	s := &Sandbox{cfg: cfg.withDefaults()}
	s.slots = make(chan struct{}, s.cfg.Workers)
	if cfg.Off {
		s.unavailable = "The administrator turned the shell off on this server (WEFT_SHELL=off)."
		return s
	}
	if err != nil {
		s.unavailable = "The sandbox cannot be set up on this server: " + err.Error()
		return s
	}
	s.exe = exe
	var reasons []string
	for _, mode := range []struct{ userNS, hide bool }{{true, true}, {false, true}, {true, false}, {false, false}} {
		if !mode.userNS && os.Geteuid() != 0 {
			continue // without a user namespace only root can make the others
		}
		s.userNS, s.hide = mode.userNS, mode.hide
		walls, err := s.probe()
		if err == nil {
			s.walls = walls
			if len(reasons) > 0 {
				s.walls += " (" + reasons[0] + ")"
			}
			return s
		}
		reasons = append(reasons, err.Error())
	}
	s.unavailable = "The sandbox cannot be set up on this server: " + strings.Join(reasons, "; ")
	return s
}

// Unavailable is why commands cannot run on this server, or "".
func (s *Sandbox) Unavailable() string { return s.unavailable }

// Walls says what confines a command here (for the log and the admin).
func (s *Sandbox) Walls() string { return s.walls }

// Config is the sandbox's limits (defaults applied).
func (s *Sandbox) Config() Config { return s.cfg }

// probe runs the child's self-test in a throwaway workspace.
func (s *Sandbox) probe() (string, error) {
	dir, err := os.MkdirTemp("", "weft-sandbox-probe-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	ws := dir + "/ws"
	if err := os.Mkdir(ws, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(dir+"/secret", []byte("x"), 0o644); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := s.command(ctx, ws, opProbe, dir)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = err.Error()
		}
		mode := "with a user namespace"
		if !s.userNS {
			mode = "without a user namespace"
		}
		if !s.hide {
			mode += ", on the server's root"
		}
		return "", fmt.Errorf("%s: %s", mode, firstLine(msg))
	}
	return strings.TrimSpace(out.String()), nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// Outcome is what a command did.
type Outcome struct {
	// Exit is the shell's exit status (-1 when a signal ended it).
	Exit int
	// Signal ended the shell, when it did ("killed").
	Signal string
	// TimedOut: the wall-clock timeout killed it.
	TimedOut bool
	// CPULimit: the CPU-time limit ended it.
	CPULimit bool
	// DiskFull: it was killed for leaving the workspace's file system
	// less than its reserve.
	DiskFull bool
	// Flooded: it was killed for writing more output than FloodLimit.
	Flooded  bool
	Stdout   *Capped
	Stderr   *Capped
	Duration time.Duration
}

// ErrStopped is returned when the command was stopped (its context ended)
// before it finished: it may have taken effect.
var ErrStopped = errors.New("the command was stopped before it finished")

// Run runs command with /bin/sh in dir (the workspace, which must exist),
// confined. progress, when set, gets the output so far from time to time.
func (s *Sandbox) Run(ctx context.Context, dir, command string, progress func(string)) (Outcome, error) {
	if s.unavailable != "" {
		return Outcome{}, errors.New(s.unavailable)
	}
	// The child rebuilds the path in its own root: it must be absolute
	// and free of symbolic links (WEFT_DATA_DIR may be relative).
	dir, err := filepath.Abs(dir)
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("sandbox: the workspace: %w", err)
	}
	if err := checkWorkspace(dir); err != nil {
		return Outcome{}, err
	}
	if why := s.diskLow(dir); why != "" {
		return Outcome{}, fmt.Errorf("%w: %s", ErrDiskFull, why)
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return Outcome{}, ctx.Err() // nothing ran
	}
	defer func() { <-s.slots }()
	wall := s.cfg.Timeout
	if dl, ok := ctx.Deadline(); ok {
		// Ending before the caller's deadline lets the result (and the
		// files changed) reach it.
		if left := time.Until(dl) - 2*time.Second; left < wall {
			wall = max(left, time.Second)
		}
	}
	o := Outcome{Stdout: newCapped(s.cfg.Output), Stderr: newCapped(s.cfg.Output)}
	cmd := s.command(context.WithoutCancel(ctx), dir, opRun, command)
	pr := &progressor{fn: progress, out: o.Stdout, err: o.Stderr}
	flood := &flooded{limit: s.cfg.floodLimit(), c: make(chan struct{})}
	cmd.Stdout = &streamWriter{c: o.Stdout, p: pr, f: flood}
	cmd.Stderr = &streamWriter{c: o.Stderr, p: pr, f: flood}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return o, fmt.Errorf("sandbox: start: %w", err)
	}
	if s.started != nil {
		s.started(cmd.Process.Pid)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(wall)
	defer timer.Stop()
	full := make(chan struct{})
	watched := make(chan struct{})
	defer close(watched)
	go s.watchDisk(dir, full, watched)
	var stopped bool
	select {
	case err = <-done:
	case <-full:
		o.DiskFull = true
		kill(cmd.Process.Pid)
		err = <-done
	case <-flood.c:
		o.Flooded = true
		kill(cmd.Process.Pid)
		err = <-done
	case <-timer.C:
		o.TimedOut = true
		kill(cmd.Process.Pid)
		err = <-done
	case <-ctx.Done():
		stopped = true
		kill(cmd.Process.Pid)
		err = <-done
	}
	o.Duration = time.Since(start)
	if stopped {
		return o, ErrStopped
	}
	o.Exit = cmd.ProcessState.ExitCode()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return o, fmt.Errorf("sandbox: %w", err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		o.Signal = ws.Signal().String()
		ps := cmd.ProcessState
		if !o.TimedOut && (ws.Signal() == syscall.SIGXCPU ||
			ws.Signal() == syscall.SIGKILL && ps.UserTime()+ps.SystemTime() >= s.cfg.CPU.Truncate(time.Second)*3/4) {
			o.CPULimit = true
		}
	}
	if !o.TimedOut && o.Exit == exitChildFailed && strings.HasPrefix(o.Stderr.String(), childPrefix) {
		if strings.Contains(o.Stderr.String(), errConfigNotDir.Error()) {
			return o, &agent.ToolError{Msg: "The command did not run: " + errConfigNotDir.Error() + "."}
		}
		return o, fmt.Errorf("sandbox: the child could not confine itself: %s", firstLine(o.Stderr.String()))
	}
	return o, nil
}

// shownDirs are what a command sees of the server's folders besides its
// workspace (read-only); the kernel's own are never a workspace either.
var shownDirs = append([]string{"/proc", "/dev", "/sys"}, systemDirs...)

// checkWorkspace refuses a workspace inside a folder every command reads
// (WEFT_DATA_DIR under /usr: each command would read every other
// workspace and upload) or holding one (a workspace of / would be the
// whole system, writable).
func checkWorkspace(dir string) error {
	for _, d := range shownDirs {
		if under(dir, d) || under(d, dir) {
			return fmt.Errorf("sandbox: the workspace %s is inside or holds %s, which every command reads: move WEFT_DATA_DIR out of the system folders", dir, d)
		}
	}
	return nil
}

// ErrDiskFull is returned when a command does not start for want of
// space on its workspace's file system.
var ErrDiskFull = errors.New("the workspace's disk is nearly full")

// diskEvery is how often a running command's file system is checked: at
// ~1.5 GB/s into the page cache, a command overshoots the reserve by
// ~150 MB at most.
const diskEvery = 100 * time.Millisecond

// diskLow says how the file system of dir is below its reserve, or "".
func (s *Sandbox) diskLow(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return ""
	}
	bs := uint64(st.Bsize)
	free, total := st.Bavail*bs, st.Blocks*bs
	reserve := uint64(max(s.cfg.DiskReserve, 0))
	if s.cfg.DiskReserve == 0 {
		reserve = max(2<<30, total/20)
	}
	if free < reserve {
		return fmt.Sprintf("%d MB free, under the %d MB kept free", free>>20, reserve>>20)
	}
	if st.Files > 0 && s.cfg.DiskReserve == 0 {
		if inodes := max(50000, st.Files/20); st.Ffree < inodes {
			return fmt.Sprintf("%d files more can be made, under the %d kept", st.Ffree, inodes)
		}
	}
	return ""
}

// watchDisk closes full when dir's file system goes below its reserve,
// until done is closed.
func (s *Sandbox) watchDisk(dir string, full, done chan struct{}) {
	t := time.NewTicker(diskEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if s.diskLow(dir) != "" {
				close(full)
				return
			}
		}
	}
}

// kill ends a command: its process group, and its PID namespace's init
// (which takes every process of the namespace with it).
func kill(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// command is the child process for op; its working directory is dir.
func (s *Sandbox) command(ctx context.Context, dir, op, arg string) *exec.Cmd {
	c := s.cfg
	hide := "show"
	if s.hide {
		hide = "hide"
	}
	cmd := exec.CommandContext(ctx, s.exe, childArg, op,
		strconv.FormatInt(int64(max(1, c.CPU/time.Second)), 10),
		strconv.FormatInt(c.Memory, 10),
		strconv.Itoa(c.Processes),
		strconv.FormatInt(c.FileSize, 10),
		hide, dir, arg)
	cmd.Dir = dir
	// Nothing of the server's environment (DATABASE_URL, tokens) reaches
	// the command. HOME is the private /tmp: caches and dotfiles that
	// tools write there vanish with the command instead of cluttering the
	// workspace (and its files changed).
	cmd.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=/tmp",
		"PWD=" + dir,
		"TMPDIR=/tmp",
		"LANG=C.UTF-8",
		"TERM=dumb",
		"GOMAXPROCS=1",
	}
	cmd.Stdin = nil // /dev/null
	attr := &syscall.SysProcAttr{
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
	}
	if s.userNS {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	cmd.SysProcAttr = attr
	cmd.Cancel = func() error { kill(cmd.Process.Pid); return nil }
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// Capped keeps the first and the last half of max bytes written to it.
type Capped struct {
	mu    sync.Mutex
	max   int
	head  []byte
	tail  []byte // a ring of the last bytes, once head is full
	total int64
}

func newCapped(max int) *Capped { return &Capped{max: max} }

func (c *Capped) write(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	if room := c.max/2 - len(c.head); room > 0 {
		n := min(room, len(p))
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	if len(p) == 0 {
		return
	}
	keep := c.max - c.max/2
	c.tail = append(c.tail, p...)
	if len(c.tail) > keep {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-keep:]...)
	}
}

// Total is how many bytes were written.
func (c *Capped) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// String is what was kept, with a marker where bytes were dropped, as
// text (see asText).
func (c *Capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	dropped := c.total - int64(len(c.head)+len(c.tail))
	if dropped <= 0 {
		return asText(string(c.head) + string(c.tail))
	}
	return fmt.Sprintf("%s\n[… %d bytes left out …]\n%s", asText(string(c.head)), dropped, asText(string(c.tail)))
}

// asText is output as the step records and the model can take it: valid
// UTF-8 and no NUL byte (which PostgreSQL's jsonb refuses: one printf
// '\0' would fail the whole run), each replaced by U+FFFD.
func asText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	return s
}

// last is the last n bytes kept.
func (c *Capped) last(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := append(append([]byte(nil), c.head...), c.tail...)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return asText(string(b))
}

type streamWriter struct {
	c *Capped
	p *progressor
	f *flooded
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.c.write(p)
	w.p.tick()
	w.f.add(len(p))
	return len(p), nil
}

// floodFactor × Output is the output a command may write, both streams
// together, before it is killed: all but Output is thrown away, and
// reading it costs the server (`yes` writes ~4 GB/s, which took 0.6 of a
// core of the server to read — per command).
const floodFactor = 1024

func (c Config) floodLimit() int64 { return max(int64(c.Output)*floodFactor, 16<<20) }

// flooded closes c once more than limit bytes were written.
type flooded struct {
	limit int64
	mu    sync.Mutex
	n     int64
	c     chan struct{}
}

func (f *flooded) add(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	was := f.n
	f.n += int64(n)
	if was <= f.limit && f.n > f.limit {
		close(f.c)
	}
}

// progressor reports the output so far, at most every progressEvery.
type progressor struct {
	fn       func(string)
	out, err *Capped
	mu       sync.Mutex
	last     time.Time
}

const progressEvery = 500 * time.Millisecond

func (p *progressor) tick() {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	if time.Since(p.last) < progressEvery {
		p.mu.Unlock()
		return
	}
	p.last = time.Now()
	p.mu.Unlock()
	p.fn(p.out.last(2000) + p.err.last(1000))
}
