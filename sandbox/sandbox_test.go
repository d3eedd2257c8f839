package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// newSandbox is a sandbox with small limits; it fails the test when the
// sandbox cannot be set up here (the walls are the point).
func newSandbox(t *testing.T, cfg Config) *Sandbox {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = 20 * time.Second
	}
	if cfg.Processes == 0 {
		cfg.Processes = 16
	}
	s := New(cfg)
	if s.Unavailable() != "" {
		t.Fatalf("the sandbox cannot be set up: %s", s.Unavailable())
	}
	return s
}

func run(t *testing.T, s *Sandbox, dir, command string) Outcome {
	t.Helper()
	o, err := s.Run(context.Background(), dir, command, nil)
	if err != nil {
		t.Fatalf("run %q: %v", command, err)
	}
	return o
}

// processGone reports whether no process of the group (or the PID
// namespace whose init was pid) is left.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH) && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestACommandRunsInTheWorkspaceAndSeesNoneOfTheServersEnvironment(t *testing.T) {
	t.Setenv("WEFT_TEST_SECRET", "hunter2-secret")
	t.Setenv("DATABASE_URL", "postgres://weft:hunter2-db@db/weft")
	s := newSandbox(t, Config{})
	ws := t.TempDir()
	o := run(t, s, ws, fmt.Sprintf(`pwd; env; cat /proc/%[1]d/environ; cat /proc/1/environ; tr '\0' '\n' < /proc/self/environ; kill -0 %[1]d || echo NO-SIGNAL; echo made > made.txt; ls /proc | grep -c '^[0-9]'`, os.Getpid()))
	out, errs := o.Stdout.String(), o.Stderr.String()
	if o.Exit != 0 {
		t.Logf("exit %d (a cat of the server's environ is expected to fail): %s", o.Exit, errs)
	}
	if !strings.HasPrefix(out, ws+"\n") {
		t.Fatalf("the command did not run in the workspace %s: %q", ws, out)
	}
	for _, secret := range []string{"hunter2", "DATABASE_URL", "WEFT_TEST_SECRET"} {
		if strings.Contains(out, secret) || strings.Contains(errs, secret) {
			t.Fatalf("the server's environment (%s) is visible to the command:\n%s\n%s", secret, out, errs)
		}
	}
	if !strings.Contains(out, "NO-SIGNAL") {
		t.Fatalf("the command could signal the server: %s", out)
	}
	if !strings.Contains(out, "PATH=/usr/local/bin:/usr/bin:/bin") || !strings.Contains(out, "HOME=/tmp\n") {
		t.Fatalf("the command's environment lacks its PATH: %s", out)
	}
	if !strings.Contains(errs, fmt.Sprintf("/proc/%d/environ", os.Getpid())) {
		t.Fatalf("reading the server's /proc environ did not fail: %s", errs)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "made.txt")); err != nil || string(b) != "made\n" {
		t.Fatalf("the workspace was not writable: %q %v", b, err)
	}
	// Its /proc shows its own processes only (sh and ls, grep).
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if n, _ := strconv.Atoi(lines[len(lines)-1]); n < 1 || n > 5 {
		t.Fatalf("the command sees %d processes in /proc, not only its own", n)
	}
}

// WEFT_DATA_DIR may be relative, and so the workspace's path.
func TestARelativeOrLinkedWorkspacePathWorks(t *testing.T) {
	s := newSandbox(t, Config{})
	base := t.TempDir()
	if err := os.Mkdir(filepath.Join(base, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("ws", filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(base)
	for _, dir := range []string{"ws", "link", filepath.Join(base, "link")} {
		o := run(t, s, dir, "pwd; echo x > f")
		if o.Exit != 0 || o.Stdout.String() != filepath.Join(base, "ws")+"\n" {
			t.Fatalf("in %s: exit %d, %q %q", dir, o.Exit, o.Stdout.String(), o.Stderr.String())
		}
	}
	if _, err := os.Stat(filepath.Join(base, "ws", "f")); err != nil {
		t.Fatal(err)
	}
}

func TestAConnectTo127001FailsAndReachesNoListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	s := newSandbox(t, Config{})
	o := run(t, s, t.TempDir(), fmt.Sprintf(`bash -c 'echo hi > /dev/tcp/127.0.0.1/%d' && echo CONNECTED; curl -sS -m 2 http://127.0.0.1:%d/ && echo CONNECTED; true`, port, port))
	if strings.Contains(o.Stdout.String(), "CONNECTED") {
		t.Fatalf("the command reached 127.0.0.1:%d: %s", port, o.Stdout.String())
	}
	// Landlock refuses the TCP connect before routing would.
	if !strings.Contains(o.Stderr.String(), "Permission denied") {
		t.Fatalf("the connect was not refused by Landlock: %s", o.Stderr.String())
	}
	// A connection would be waiting in the listener's backlog (a
	// deadline in the past would fail before looking).
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(50 * time.Millisecond))
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Fatal("the listener got a connection from the sandbox")
	}
}

// UDP, which Landlock (ABI 7) does not restrict, meets the second wall:
// the command's network namespace has no interface up.
func TestUDPTo127001FailsForWantOfANetwork(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	port := pc.LocalAddr().(*net.UDPAddr).Port
	s := newSandbox(t, Config{})
	o := run(t, s, t.TempDir(), fmt.Sprintf(`bash -c 'echo hi > /dev/udp/127.0.0.1/%d' && echo SENT; true`, port))
	if strings.Contains(o.Stdout.String(), "SENT") || !strings.Contains(o.Stderr.String(), "unreachable") {
		t.Fatalf("a UDP datagram left the sandbox: %s %s", o.Stdout.String(), o.Stderr.String())
	}
	pc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, _, err := pc.ReadFrom(make([]byte, 16)); err == nil {
		t.Fatalf("the listener got %d bytes from the sandbox", n)
	}
}

// Both ways of confining the files are tried: a root of the command's own
// (what this machine gets) and Landlock alone on the server's root, as on
// a server where the root cannot be built — which needs Landlock ABI 9
// (UNIX sockets) and is refused, saying so, on older kernels.
func TestWritesAndReadsOutsideTheWorkspaceFail(t *testing.T) {
	abi, _ := llsys.LandlockGetABIVersion()
	for _, hide := range []bool{true, false} {
		t.Run(map[bool]string{true: "own root", false: "Landlock only"}[hide], func(t *testing.T) {
			s := newSandbox(t, Config{})
			if !s.hide {
				t.Fatalf("this machine cannot build the command's root: %s", s.Walls())
			}
			s.hide = hide
			_, err := s.probe()
			if !hide && abi < minLandlockABIShown {
				if err == nil || !strings.Contains(err.Error(), "UNIX sockets") {
					t.Fatalf("Landlock ABI %d on the server's root was accepted: %v", abi, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			outsideTheWorkspace(t, s)
		})
	}
}

func outsideTheWorkspace(t *testing.T, s *Sandbox) {
	ws := t.TempDir()
	// A folder outside the workspace that is not under /tmp (which the
	// sandbox replaces with a private one): next to this test's sources.
	wd, _ := os.Getwd()
	outside, err := os.MkdirTemp(wd, "outside-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(outside)
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("hunter2"), 0o644); err != nil {
		t.Fatal(err)
	}
	sibling := t.TempDir() // under /tmp: the command sees an empty private /tmp instead
	sock := filepath.Join(outside, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	o := run(t, s, ws, fmt.Sprintf(`
echo x > %[1]s/escape.txt || echo WRITE-DENIED
cat %[1]s/secret.txt || echo READ-DENIED
ls %[1]s || echo LIST-DENIED
echo x > %[2]s/escape.txt || echo TMP-DENIED
echo x > /etc/weft-escape || echo ETC-DENIED
cat /etc/shadow || echo SHADOW-DENIED
ln -s %[1]s/secret.txt link && cat link || echo LINK-DENIED
test -e %[1]s && echo OUTSIDE-EXISTS
test -e /etc/shadow && echo SHADOW-EXISTS
curl -sS -m 2 --unix-socket %[1]s/s http://x/; [ $? = 7 ] && echo UNIX-DENIED
echo x > /tmp/scratch && cat /tmp/scratch
echo inside > inside.txt
`, outside, sibling))
	out := o.Stdout.String()
	for _, want := range []string{"WRITE-DENIED", "READ-DENIED", "LIST-DENIED", "TMP-DENIED", "ETC-DENIED", "SHADOW-DENIED", "LINK-DENIED", "UNIX-DENIED"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s:\n%s\n%s", want, out, o.Stderr.String())
		}
	}
	ln.(*net.UnixListener).SetDeadline(time.Now().Add(50 * time.Millisecond))
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Error("a UNIX socket outside the workspace got a connection")
	}
	if s.hide && (strings.Contains(out, "OUTSIDE-EXISTS") || strings.Contains(out, "SHADOW-EXISTS")) {
		t.Errorf("paths outside the workspace exist in the command's own root: %s", out)
	}
	if strings.Contains(out, "hunter2") {
		t.Fatalf("a file outside the workspace was read: %s", out)
	}
	for _, p := range []string{filepath.Join(outside, "escape.txt"), filepath.Join(sibling, "escape.txt"), "/etc/weft-escape", "/tmp/scratch"} {
		if _, err := os.Lstat(p); err == nil {
			os.Remove(p)
			t.Errorf("the command wrote %s outside the workspace", p)
		}
	}
	if !strings.Contains(out, "x\n") {
		t.Errorf("the private /tmp is not writable: %s %s", out, o.Stderr.String())
	}
	if _, err := os.Stat(filepath.Join(ws, "inside.txt")); err != nil {
		t.Errorf("the workspace was not writable: %v", err)
	}
	if want := map[bool]string{true: "No such file", false: "Permission denied"}[s.hide]; !strings.Contains(o.Stderr.String(), want) {
		t.Errorf("the denials are not the sandbox's (want %q): %s", want, o.Stderr.String())
	}
}

// The bound is the PID namespace's pid_max (301 at the least, the
// kernel's minimum) for a root server, which RLIMIT_NPROC exempts, and
// RLIMIT_NPROC (16 here) otherwise.
func bound(procs int) int {
	if os.Geteuid() == 0 {
		return reservedPIDs + procs + 1
	}
	return procs
}

func TestProcessesAreBoundedAndNoneOutlivesTheCommand(t *testing.T) {
	s := newSandbox(t, Config{Processes: 16})
	ws := t.TempDir()
	// Each background sleep is one more process; the last count that
	// forked is in the file n.
	start := time.Now()
	o := run(t, s, ws, `i=0; while [ $i -lt 2000 ]; do sleep 31.5 & i=$((i+1)); echo $i > n; done`)
	b, _ := os.ReadFile(filepath.Join(ws, "n"))
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if n < 10 || n >= bound(16) {
		t.Fatalf("%d processes started, want at least 10 and fewer than %d (stderr %s)", n, bound(16), o.Stderr.String())
	}
	if !strings.Contains(o.Stderr.String(), "fork") {
		t.Fatalf("forking did not fail at the bound: exit %d, %s", o.Exit, o.Stderr.String())
	}
	if sleeps := countProcs("sleep\x0031.5"); sleeps != 0 {
		t.Fatalf("%d of the command's processes outlived it", sleeps)
	}
	t.Logf("%d processes, then fork failed; %s", n, time.Since(start))
}

func TestAForkBombHitsTheBoundAndLeavesNoProcessBehind(t *testing.T) {
	s := newSandbox(t, Config{Processes: 16, Timeout: 2 * time.Second, CPU: 2 * time.Second})
	var pid int
	s.started = func(p int) { pid = p }
	start := time.Now()
	// Every f starts two more and waits for them: all stay alive.
	o := run(t, s, t.TempDir(), `f() { f & f & wait; }; f`)
	took := time.Since(start)
	if !strings.Contains(o.Stderr.String(), "fork") {
		t.Fatalf("the fork bomb did not reach the bound: %+v %s", o, o.Stderr.String())
	}
	if took > 10*time.Second {
		t.Fatalf("the fork bomb ran %s", took)
	}
	if !processGone(pid) {
		t.Fatal("processes of the fork bomb survive it")
	}
	t.Logf("ended after %s (timed out %v, exit %d)", took, o.TimedOut, o.Exit)
}

func TestAnEndlessLoopIsStoppedByTheCPULimitAndASleepByTheWallClock(t *testing.T) {
	s := newSandbox(t, Config{CPU: time.Second, Timeout: 20 * time.Second})
	o := run(t, s, t.TempDir(), `while :; do :; done`)
	if !o.CPULimit || o.TimedOut || o.Duration > 15*time.Second {
		t.Fatalf("a busy loop was not ended by the CPU limit: %+v (%s)", o, o.Stderr.String())
	}
	s = newSandbox(t, Config{Timeout: time.Second})
	var pid int
	s.started = func(p int) { pid = p }
	o = run(t, s, t.TempDir(), `sleep 100 & sleep 100`)
	if !o.TimedOut || o.Duration > 10*time.Second {
		t.Fatalf("a sleep was not ended by the wall clock: %+v", o)
	}
	if !processGone(pid) {
		t.Fatal("the command's processes survive the timeout")
	}
}

func TestStopKillsTheWholeProcessGroup(t *testing.T) {
	s := newSandbox(t, Config{})
	var pid int
	s.started = func(p int) { pid = p }
	ctx, cancel := context.WithCancel(context.Background())
	running := make(chan struct{})
	var once bool
	progress := func(string) {
		if !once {
			once = true
			close(running)
		}
	}
	done := make(chan error, 1)
	var o Outcome
	go func() {
		var err error
		o, err = s.Run(ctx, t.TempDir(), `echo started; sleep 100 & sleep 100`, progress)
		done <- err
	}()
	select {
	case <-running:
	case err := <-done:
		t.Fatalf("the command ended before Stop: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the command did not start")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStopped) {
			t.Fatalf("a stopped command returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not end the command")
	}
	if !processGone(pid) {
		t.Fatal("the command's process group survives Stop")
	}
	if o.Duration > 10*time.Second {
		t.Fatalf("Stop took %s", o.Duration)
	}
}

// Past Workers commands at once, a command waits for a slot; one whose
// time ends while it waits never runs.
func TestCommandsPastTheWorkersWaitAndMayNeverRun(t *testing.T) {
	s := newSandbox(t, Config{Workers: 1})
	ctx, stop := context.WithCancel(context.Background())
	running := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(ctx, t.TempDir(), "echo started; sleep 100", func(string) { once.Do(func() { close(running) }) })
		done <- err
	}()
	select {
	case <-running:
	case err := <-done:
		t.Fatalf("the first command ended: %v", err)
	}
	ws := t.TempDir()
	wctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := s.Run(wctx, ws, "touch ran", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a command waiting for a slot: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Fatal("a command ran past the workers")
	}
	stop()
	if err := <-done; !errors.Is(err, ErrStopped) {
		t.Fatalf("the first command: %v", err)
	}
	if o := run(t, s, ws, "touch ran"); o.Exit != 0 {
		t.Fatalf("after the slot was freed: %+v", o)
	}
}

func TestFileSizeAndMemoryAreLimited(t *testing.T) {
	s := newSandbox(t, Config{FileSize: 1 << 20, Memory: 64 << 20})
	ws := t.TempDir()
	o := run(t, s, ws, `head -c 3000000 /dev/zero > big; perl -e '$x = "a" x (200<<20); print "ALLOCATED\n"'; ulimit -s unlimited || echo STACK-BOUNDED; echo done`)
	if st, err := os.Stat(filepath.Join(ws, "big")); err != nil || st.Size() > 1<<20 {
		t.Fatalf("a file grew past the limit: %v %v", st.Size(), err)
	}
	if strings.Contains(o.Stdout.String(), "ALLOCATED") || !strings.Contains(o.Stderr.String(), "Out of memory") {
		t.Fatalf("a process used more memory than allowed: %s / %s", o.Stdout.String(), o.Stderr.String())
	}
	if !strings.Contains(o.Stdout.String(), "STACK-BOUNDED") {
		t.Fatalf("a process could grow its stack without bound: %s", o.Stdout.String())
	}
}

func TestOutputKeepsItsStartAndEnd(t *testing.T) {
	s := newSandbox(t, Config{Output: 1000})
	o := run(t, s, t.TempDir(), `seq 1 100000; echo oops >&2`)
	out := o.Stdout.String()
	if !strings.HasPrefix(out, "1\n2\n3\n") || !strings.HasSuffix(out, "99999\n100000\n") || !strings.Contains(out, "bytes left out") || len(out) > 1100 {
		t.Fatalf("the output was not cut to its start and end (%d bytes): %q", len(out), out)
	}
	if o.Stdout.Total() != 588895 || o.Stderr.String() != "oops\n" {
		t.Fatalf("totals: %d, stderr %q", o.Stdout.Total(), o.Stderr.String())
	}
}

func TestTheToolIsUnavailableAndSaysWhyWhenTheSandboxCannotBeSetUp(t *testing.T) {
	tools := NewProvider(New(Config{Off: true})).Tools()
	if len(tools) != 1 || tools[0].Name != "run_command" || !strings.Contains(tools[0].Unavailable, "WEFT_SHELL=off") {
		t.Fatalf("the shell turned off: %+v", tools)
	}
	// A child that does not confine itself (here: one that fails) makes
	// the tool unavailable, and no command runs.
	s := newAt(Config{}, "/bin/false", nil)
	tools = NewProvider(s).Tools()
	if u := tools[0].Unavailable; !strings.HasPrefix(u, "The sandbox cannot be set up on this server: ") {
		t.Fatalf("a sandbox that cannot be set up: %q", u)
	}
	ws := t.TempDir()
	if _, err := s.Run(context.Background(), ws, "touch ran", nil); err == nil {
		t.Fatal("a command ran without a sandbox")
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Fatal("a command ran without a sandbox")
	}
}

// countProcs counts this machine's processes whose command line is cmdline.
func countProcs(cmdline string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.TrimRight(string(b), "\x00") == cmdline {
			n++
		}
	}
	return n
}

// A descriptor the server inherited without close-on-exec (from its
// supervisor or shell: os/exec passes such ones on) reaches a file
// outside the workspace; the command must not get it.
func TestADescriptorTheServerInheritedDoesNotReachTheCommand(t *testing.T) {
	wd, _ := os.Getwd()
	outside, err := os.MkdirTemp(wd, "outside-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(outside)
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("hunter2"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(secret, syscall.O_RDWR, 0) // no O_CLOEXEC, as from a parent
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	s := newSandbox(t, Config{})
	o := run(t, s, t.TempDir(), fmt.Sprintf(`cat <&%[1]d; cat /proc/self/fd/%[1]d; echo pwned >&%[1]d; ls /proc/1/fd`, fd))
	if strings.Contains(o.Stdout.String(), "hunter2") {
		t.Fatalf("the command read a file outside through descriptor %d: %s", fd, o.Stdout.String())
	}
	if b, _ := os.ReadFile(secret); string(b) != "hunter2" {
		t.Fatalf("the command wrote a file outside through descriptor %d: %q", fd, b)
	}
	if fds := strings.Fields(o.Stdout.String()); len(fds) != 3 || fds[0] != "0" || fds[1] != "1" || fds[2] != "2" {
		t.Fatalf("the shell holds descriptors past stdin, stdout and stderr: %v (%s)", fds, o.Stderr.String())
	}
}

// Memory is bounded per process only, and memfds escape RLIMIT_DATA: a
// command that exhausts the machine's memory must be what the OOM killer
// takes, not PostgreSQL or the server. Here a process under a 32 MiB
// limit holds 96 MiB in memfds (perl's syscall: memfd_create is 319 on
// amd64, 279 on arm64).
func TestACommandIsTheOOMKillersFirstChoiceAndCannotChangeThat(t *testing.T) {
	s := newSandbox(t, Config{Memory: 32 << 20})
	ws := t.TempDir()
	nr := map[string]int{"amd64": 319, "arm64": 279}[runtime.GOARCH]
	o := run(t, s, ws, fmt.Sprintf(`cat /proc/self/oom_score_adj; echo -1000 > /proc/self/oom_score_adj; cat /proc/self/oom_score_adj
perl -e 'for my $i (1..3) { my $n = "m$i"; my $fd = syscall(%d, $n, 0); die "memfd: $!" if $fd < 0; open(my $f, ">&=", $fd) or die; print $f "a" x (1<<20) for 1..32; $f->flush; push @k, $f } print "HELD\n"'`, nr))
	if got := strings.Fields(o.Stdout.String()); len(got) < 2 || got[0] != "1000" || got[1] != "1000" {
		t.Fatalf("the command's OOM score adjustment: %v (%s)", got, o.Stderr.String())
	}
	t.Logf("96 MiB held in memfds under a 32 MiB RLIMIT_DATA: %v", strings.Contains(o.Stdout.String(), "HELD"))
}

// A new user namespace would give the command back every capability
// inside it — CAP_NET_ADMIN over a network namespace of its own is where
// most kernel privilege escalations start (nf_tables); AF_VSOCK is not
// isolated by network namespaces; keyrings are not namespaced at all; a
// set-user-ID file would run as the server's uid for anyone on the host.
func TestACommandCannotRegainCapabilitiesNorReachVsockKeyringsOrSetUID(t *testing.T) {
	s := newSandbox(t, Config{})
	nr := map[string][3]int{"amd64": {272, 250, 323}, "arm64": {97, 219, 282}}[runtime.GOARCH] // unshare, keyctl, userfaultfd
	// The capabilities are there until the next exec (the new namespace
	// maps no uid): look from the same process.
	ws := t.TempDir()
	o := run(t, s, ws, fmt.Sprintf(`
perl -e 'syscall(%d, 0x10000000) == 0 or die "unshare: $!\n"; open S, "/proc/self/status"; print grep /^CapEff/, <S>' || echo USERNS-DENIED
unshare -Urn true || echo USERNS-MAP-DENIED
perl -e 'socket(S, 40, 1, 0) or die "vsock: $!\n"; print "VSOCK\n"' || echo VSOCK-DENIED
perl -e 'socket(S, 17, 3, 0) or die "packet: $!\n"; print "PACKET\n"' || echo PACKET-DENIED
perl -e 'my $id = syscall(%d, 0, -3, 0); die "keyctl: $!\n" if $id < 0; print "KEYRING $id\n"' || echo KEYRING-DENIED
perl -e 'use threads; threads->create(sub { print "THREAD\n" })->join'
cp /bin/sh rootsh && chmod u+s rootsh || echo SETUID-DENIED
chmod g+s rootsh || echo SETGID-DENIED
perl -MFcntl -e 'sysopen(F, "rootsh2", O_CREAT|O_WRONLY, 04755) or die "open: $!\n"' || echo SETUID-OPEN-DENIED
perl -e 'my $p = "\0" x 120; syscall(425, 4, $p) >= 0 or die "io_uring: $!\n"; print "IOURING\n"' || echo IOURING-DENIED
perl -e 'syscall(%d, 1) >= 0 or die "userfaultfd: $!\n"; print "USERFAULTFD\n"' || echo USERFAULTFD-DENIED
`, nr[0], nr[1], nr[2]))
	out := o.Stdout.String()
	for _, want := range []string{"USERNS-DENIED", "USERNS-MAP-DENIED", "VSOCK-DENIED", "PACKET-DENIED", "KEYRING-DENIED", "THREAD",
		"SETUID-DENIED", "SETGID-DENIED", "SETUID-OPEN-DENIED", "IOURING-DENIED", "USERFAULTFD-DENIED"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s:\n%s\n%s", want, out, o.Stderr.String())
		}
	}
	if strings.Contains(out, "CapEff:\t000001") {
		t.Errorf("the command regained capabilities in a user namespace: %s", out)
	}
	// Its uid is the server's: a set-user-ID file in the workspace would
	// be a root shell on the host.
	for _, f := range []string{"rootsh", "rootsh2"} {
		if fi, err := os.Stat(filepath.Join(ws, f)); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("the command left a set-user-ID file %s: %s", f, fi.Mode())
		}
	}
}

// Every command reads the system folders: a workspace inside one (a
// WEFT_DATA_DIR under /usr) would show each command every other workspace
// and upload; a workspace of / would make them all writable.
func TestAWorkspaceInsideOrAboveTheSystemFoldersIsRefused(t *testing.T) {
	s := newSandbox(t, Config{})
	for _, dir := range []string{"/usr/share", "/usr", "/"} {
		o, err := s.Run(context.Background(), dir, "echo RAN", nil)
		if err == nil || o.Stdout != nil && strings.Contains(o.Stdout.String(), "RAN") {
			t.Errorf("a command ran in %s: %v", dir, err)
		}
	}
}

// RLIMIT_FSIZE bounds one file only: a command writing file after file
// is killed once the workspace's file system is down to its reserve (here
// set 300 MB under what is free now), and no command starts below it.
func TestACommandFillingTheDiskIsKilledAtTheReserve(t *testing.T) {
	ws := t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(ws, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	s := newSandbox(t, Config{DiskReserve: free - 300<<20})
	// fallocate would take the disk in one call, faster than any watch
	// (FALLOC_FL_KEEP_SIZE past RLIMIT_FSIZE too: 1 GB in 5 ms).
	o := run(t, s, ws, `touch kept; fallocate -n -l 1G kept || echo KEEP-SIZE-DENIED; fallocate -l 32M plain || echo PLAIN-DENIED
i=0; while [ $i -lt 40 ]; do head -c 64000000 /dev/zero > f$i || break; i=$((i+1)); done; echo WROTE-ALL`)
	for _, want := range []string{"KEEP-SIZE-DENIED", "PLAIN-DENIED"} {
		if !strings.Contains(o.Stdout.String(), want) {
			t.Errorf("no %s: %s", want, o.Stderr.String())
		}
	}
	var written int64
	ents, _ := os.ReadDir(ws)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			written += fi.Sys().(*syscall.Stat_t).Blocks * 512 // allocated, not the size
		}
	}
	if !o.DiskFull || strings.Contains(o.Stdout.String(), "WROTE-ALL") || written > 1<<30 {
		t.Fatalf("a command wrote %d MB past the reserve: %+v", written>>20, o)
	}
	if _, err := s.Run(context.Background(), ws, "echo RAN", nil); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("a command started below the reserve: %v", err)
	}
	t.Logf("killed after %d MB, in %s", written>>20, o.Duration)
}

// Linux counts inotify instances (and namespaces, fanotify groups) per
// user namespace *and* up to the user that made it — the server's: a
// command holding 128 instances would leave none to every root process of
// the host. Its user namespace's own limit stops it first.
func TestACommandCannotExhaustTheServersUsersInotifyInstances(t *testing.T) {
	s := newSandbox(t, Config{})
	if !s.userNS {
		t.Fatalf("this machine gives commands no user namespace: %s", s.Walls())
	}
	nr := map[string]int{"amd64": 294, "arm64": 26}[runtime.GOARCH] // inotify_init1
	o := run(t, s, t.TempDir(), fmt.Sprintf(`perl -e 'my $n = 0; while ($n < 40) { last if syscall(%d, 0) < 0; $n++ } print "$n\n"'; cat /proc/sys/user/max_user_namespaces`, nr))
	f := strings.Fields(o.Stdout.String())
	if len(f) != 2 || f[0] != "16" || f[1] != "0" {
		t.Fatalf("inotify instances made, user namespaces allowed: %v (%s)", f, o.Stderr.String())
	}
}

// All but Output bytes of a command's output are thrown away, but reading
// them costs the server: a command writing without end (yes: ~4 GB/s,
// 0.6 of a core of the server to read) is killed past floodFactor ×
// Output (16 MiB at the least).
func TestACommandFloodingItsOutputIsKilled(t *testing.T) {
	s := newSandbox(t, Config{Timeout: 5 * time.Second, Output: 1000})
	o := run(t, s, t.TempDir(), `yes`)
	if !o.Flooded || o.TimedOut || o.Stdout.Total() < 16<<20 || o.Stdout.Total() > 64<<20 {
		t.Fatalf("a flood of output: flooded %v, timed out %v, %d bytes read", o.Flooded, o.TimedOut, o.Stdout.Total())
	}
	t.Logf("killed after %d MB, %s", o.Stdout.Total()>>20, o.Duration)
}

// The workspace's .weft (its skills) is read-only for a command, and made
// when missing so that a command cannot make it either: a command steered
// by a hostile document cannot plant a skill later runs list in their
// prompt. A .weft that is a link stops the command.
func TestTheWorkspacesConfigFolderIsReadOnlyForACommand(t *testing.T) {
	s := newSandbox(t, Config{})
	ws := t.TempDir()
	skill := filepath.Join(ws, ConfigDir, "skills", "tidy", "SKILL.md")
	if err := os.MkdirAll(filepath.Dir(skill), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(skill, []byte("Be tidy.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := run(t, s, ws, `cat .weft/skills/tidy/SKILL.md; `+
		`mkdir .weft/skills/evil && echo planted; `+
		`echo obey >> .weft/skills/tidy/SKILL.md && echo appended; `+
		`mv .weft moved && echo moved; rm -rf .weft && echo removed; `+
		`ln .weft/skills/tidy/SKILL.md hard && echo hardlinked; `+
		`umount .weft && echo unmounted; mount -o remount,bind,rw .weft && echo remounted; `+
		`echo ok > plain.txt && echo wrote`)
	out := o.Stdout.String()
	if !strings.Contains(out, "Be tidy.") || !strings.Contains(out, "wrote") {
		t.Fatalf("the command must read .weft and write the workspace: %q / %q", out, o.Stderr.String())
	}
	for _, bad := range []string{"planted", "appended", "moved", "removed", "hardlinked", "unmounted", "remounted"} {
		if strings.Contains(out, bad) {
			t.Errorf("a command changed .weft (%s): %q", bad, out)
		}
	}
	if b, _ := os.ReadFile(skill); string(b) != "Be tidy.\n" {
		t.Errorf("the skill was changed: %q", b)
	}

	// Missing: made, empty and read-only, before the command runs.
	fresh := t.TempDir()
	o = run(t, s, fresh, `mkdir -p .weft/skills/evil && echo planted`)
	if strings.Contains(o.Stdout.String(), "planted") {
		t.Errorf("a command made a skill in a workspace without .weft")
	}
	if ents, err := os.ReadDir(filepath.Join(fresh, ConfigDir)); err != nil || len(ents) != 0 {
		t.Errorf("the fresh workspace's .weft: %v %v", ents, err)
	}

	// A link: the command does not run.
	linked := t.TempDir()
	if err := os.Mkdir(filepath.Join(linked, "elsewhere"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("elsewhere", filepath.Join(linked, ConfigDir)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Run(context.Background(), linked, `echo ran > ran.txt`, nil)
	if err == nil || !strings.Contains(err.Error(), "is not a folder") {
		t.Errorf("a command ran with .weft a link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(linked, "ran.txt")); err == nil {
		t.Error("the command ran")
	}
}

// A command that has started more processes in all than the kernel's 300
// reserved PIDs can still run several at once: after the PID cursor wraps,
// a namespace allocates PIDs from 300 to pid_max only, so a pid_max near
// 300 left room for one process at a time, and builds (go build runs
// hundreds of compiles) failed with EAGAIN.
func TestACommandCanStillForkAfterStartingHundredsOfProcesses(t *testing.T) {
	s := newSandbox(t, Config{Processes: 32})
	o := run(t, s, t.TempDir(), `i=0; while [ $i -lt 350 ]; do /bin/true; i=$((i+1)); done; `+
		`for j in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 0.3 & done; wait; echo all-forked`)
	if !strings.Contains(o.Stdout.String(), "all-forked") || strings.Contains(o.Stderr.String(), "fork") {
		t.Fatalf("after 350 processes, 12 at once could not start: exit %d, %q / %q", o.Exit, o.Stdout.String(), o.Stderr.String())
	}
}
