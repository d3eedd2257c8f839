package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// profileOverlay is added to package main only for -pprof builds (go build
// -overlay), so the product has no profiling endpoint: it serves
// net/http/pprof on the address in WEFT_BENCH_PPROF.
const profileOverlay = `package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime/pprof"
	"sync"
)

func init() {
	a := os.Getenv("WEFT_BENCH_PPROF")
	if a == "" {
		return
	}
	var mu sync.Mutex
	var f *os.File
	http.HandleFunc("/bench/cpu/start", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if f != nil {
			http.Error(w, "already profiling", http.StatusConflict)
			return
		}
		out, err := os.Create(r.URL.Query().Get("file"))
		if err == nil {
			err = pprof.StartCPUProfile(out)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		f = out
	})
	http.HandleFunc("/bench/cpu/stop", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if f != nil {
			pprof.StopCPUProfile()
			_ = f.Close()
			f = nil
		}
	})
	go func() { _ = http.ListenAndServe(a, nil) }()
}
`

func (e *env) buildWeft(ctx context.Context, repo, rev string, pprof bool) (string, error) {
	bin := filepath.Join(e.tmp, "weft")
	if rev != "" {
		src := filepath.Join(e.tmp, "src")
		if err := os.MkdirAll(src, 0o755); err != nil {
			return "", err
		}
		archive := exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar", rev)
		untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
		pipe, err := archive.StdoutPipe()
		if err != nil {
			return "", err
		}
		untar.Stdin = pipe
		var errb bytes.Buffer
		archive.Stderr, untar.Stderr = &errb, &errb
		if err := untar.Start(); err != nil {
			return "", err
		}
		if err := archive.Run(); err != nil {
			_ = untar.Wait()
			return "", fmt.Errorf("git archive %s: %w: %s", rev, err, errb.String())
		}
		if err := untar.Wait(); err != nil {
			return "", fmt.Errorf("untar: %w: %s", err, errb.String())
		}
		repo = src
	}
	args := []string{"build", "-o", bin}
	if pprof {
		src := filepath.Join(e.tmp, "zz_bench_pprof.go")
		if err := os.WriteFile(src, []byte(profileOverlay), 0o644); err != nil {
			return "", err
		}
		abs, err := filepath.Abs(filepath.Join(repo, "zz_bench_pprof.go"))
		if err != nil {
			return "", err
		}
		ov := filepath.Join(e.tmp, "overlay.json")
		if err := os.WriteFile(ov, fmt.Appendf(nil, `{"Replace":{%q:%q}}`, abs, src), 0o644); err != nil {
			return "", err
		}
		args = append(args, "-overlay", ov)
	}
	args = append(args, ".")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (e *env) startWeft(ctx context.Context, bin string, extraEnv []string, pprof bool) error {
	w, err := e.launchWeft(ctx, bin, "bench", extraEnv, pprof)
	if err != nil {
		return err
	}
	e.weft, e.weftBase, e.weftLog = w.cmd, w.base, w.log
	return nil
}

// weftProc is one running weft process.
type weftProc struct {
	cmd  *exec.Cmd
	base string // http://127.0.0.1:port
	log  string
}

// launchWeft starts one weft process as instance (its WEFT_INSTANCE_ID;
// its own address, data folder and log) and waits until it is ready.
func (e *env) launchWeft(ctx context.Context, bin, instance string, extraEnv []string, pprof bool) (*weftProc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dataDir := filepath.Join(e.tmp, "weft-data-"+instance)
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	w := &weftProc{base: "http://" + addr, log: filepath.Join(e.tmp, "weft-"+instance+".log")}
	logf, err := os.Create(w.log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
	w.cmd = cmd
	cmd.Dir = e.tmp
	dbURL := e.dbURL
	if e.poolMaxConns > 0 {
		sep := "?"
		if strings.Contains(dbURL, "?") {
			sep = "&"
		}
		dbURL += sep + "pool_max_conns=" + strconv.Itoa(e.poolMaxConns)
	}
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+dbURL,
		"OLLAMA_HOST="+e.modelURL,
		"WEFT_ADDR="+addr,
		"WEFT_DEFAULT_MODEL=tiny",
		"WEFT_MAX_RUNS_PER_USER=100000",
		"WEFT_MAX_STREAMS_PER_USER=100000", // every simulated person may stream many runs
		"WEFT_SIGNUP_LIMIT=0",              // every person signs up from 127.0.0.1
		"WEFT_DATA_DIR="+dataDir,
		"WEFT_INSTANCE_ID="+instance,
		"WEFT_SHUTDOWN_GRACE_SECONDS=0",
	)
	if pprof {
		pa, err := freeAddr()
		if err != nil {
			return nil, err
		}
		cmd.Env = append(cmd.Env, "WEFT_BENCH_PPROF="+pa)
		e.pprofURL = "http://" + pa
	}
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// If this tool dies without cleaning up, the kernel kills weft.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited); logf.Close() }()
	e.addCleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	// Ready when /readyz answers 200.
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return nil, fmt.Errorf("weft exited during start-up:\n%s", logTail(w.log, 30))
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := http.Get(w.base + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return w, nil
			}
		}
	}
	return nil, fmt.Errorf("weft not ready after 90 s:\n%s", logTail(w.log, 30))
}

func (e *env) weftAlive() bool {
	return e.weft != nil && e.weft.ProcessState == nil && syscall.Kill(e.weft.Process.Pid, 0) == nil
}

func (e *env) weftLogTail(n int) string { return logTail(e.weftLog, n) }

func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
