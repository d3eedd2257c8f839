// Command load measures Weft's own cost against a fake model server: the
// added latency to the first token, the CPU and bytes spent relaying tokens,
// many concurrent streams, and idle memory. It is the load tool behind
// `make bench` and docs/PERFORMANCE.md.
//
// It starts everything it needs on 127.0.0.1 and removes it on exit: a
// throwaway PostgreSQL cluster (or uses -database-url), the fake Ollama
// (internal/fakeollama), which writes emission times into the streamed
// chunks as it writes them (or a small proxy in front of it does, -proxy), and Weft itself as a separate process built from
// this repository, so that /proc shows Weft's RSS and CPU alone. The
// client side signs users up and behaves like a browser: POST, thread page,
// GET /runs/{id}/events.
//
//	go run ./bench/load                      # everything, results in bench/results/latest.txt
//	go run ./bench/load -modes latency       # one part
//	go run ./bench/load -streams 100,1000 -duration 30s -pprof
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"weft/internal/fakeollama"
)

type config struct {
	modes          map[string]bool
	compare        string
	abba           bool // with compare: base, new, new, base
	databaseURL    string
	rev            string
	out            string
	profileDir     string
	proxy          bool // stamp in a proxy in front of the fake (the older harness)
	latencySends   int
	latencyConc    int
	relayAnswers   int
	streams        []int
	rate           int
	duration, ramp time.Duration
	perUser        int
	pprof          bool
	weftEnv        []string
	pgSet          []string
	sqlAfter       []string
	poolMaxConns   int
	timeout        time.Duration
	idleWait       time.Duration
	selfProfile    string
	keepLog        bool
}

type bench struct {
	cfg     config
	e       *env
	r       *report
	tr      *http.Transport
	runID   string
	persons []*person
	// persons handed out so far: each part uses fresh users
	nextPerson int

	idleRSS       int64
	firstTokenP50 time.Duration
	// with -latency-conc senders at once
	firstTokenConcP50 time.Duration
	relayInstantUS    float64
	relayPacedUS      float64 // a token every 1 ms
	relayPaced20US    float64 // a token every 20 ms
	// the relay floor of this machine at those paces (floor.go)
	relayFloor1US, relayFloor20US float64
	conc                          []concSummary
	bin                           string // the weft binary (a second instance runs it too)

	crossP50, crossP99, stopP99 time.Duration
	crossConcP99                time.Duration // 20 answers followed at once
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	var cfg config
	var modes, streams string
	var weftEnv, pgSet, sqlAfter listFlag
	flag.StringVar(&modes, "modes", "idle,latency,relay,concurrent,hostile,instances", "parts to run, comma-separated: idle, latency, relay, concurrent, hostile, instances")
	flag.StringVar(&cfg.databaseURL, "database-url", "", "use this PostgreSQL database instead of a throwaway cluster (it gets bench users and threads)")
	flag.StringVar(&cfg.compare, "compare", "", "run everything on this commit first (e.g. HEAD~1), then on -rev or the working tree, and print both side by side with ratios")
	flag.BoolVar(&cfg.abba, "abba", false, "with -compare: run base, new, then new, base again, and print both pairs (on a busy 2-core VM the first run of a pair tends to do better)")
	flag.StringVar(&cfg.rev, "rev", "", "build weft from this commit (git archive) instead of the working tree, e.g. HEAD")
	flag.StringVar(&cfg.out, "out", "bench/results/latest.txt", "write the results here as well as to stdout (\"\" for stdout only)")
	flag.IntVar(&cfg.latencySends, "latency-sends", 200, "sends per first-token latency variant")
	flag.IntVar(&cfg.latencyConc, "latency-conc", 4, "concurrency of the concurrent first-token variant")
	flag.IntVar(&cfg.relayAnswers, "relay-answers", 10, "answers of 2,000 tokens for the instant relay cost")
	flag.StringVar(&streams, "streams", "100,500,1000", "concurrent stream counts to sweep")
	flag.IntVar(&cfg.rate, "rate", 20, "tokens per second of each concurrent stream")
	flag.DurationVar(&cfg.duration, "duration", 20*time.Second, "length of each concurrent stream")
	flag.DurationVar(&cfg.ramp, "ramp", 5*time.Second, "the concurrent streams start evenly over this time")
	flag.IntVar(&cfg.perUser, "streams-per-user", 25, "concurrent streams per signed-up user")
	flag.BoolVar(&cfg.pprof, "pprof", false, "build weft with a net/http/pprof listener (build overlay, not in the product) and save CPU and heap profiles of each concurrent step")
	flag.Var(&weftEnv, "weft-env", "extra KEY=VALUE for the weft process (repeatable), e.g. GODEBUG=gctrace=1 or GOGC=50")
	flag.Var(&pgSet, "pg-set", "name=value set on the throwaway cluster before weft starts (repeatable; reloadable settings), e.g. synchronous_commit=off — an experiment, not the product's default")
	flag.Var(&sqlAfter, "sql", "SQL run on the database once weft has migrated it (repeatable; throwaway cluster only), e.g. to drop an index — an experiment")
	flag.IntVar(&cfg.poolMaxConns, "pool-max-conns", 0, "pool_max_conns for weft's connection pool (0: the product default)")
	flag.BoolVar(&cfg.proxy, "proxy", false, "stamp the model's lines in a proxy in front of the fake, as the tool did until 2026-12-05, instead of in the fake itself (costs this machine two more syscalls and a wake-up per token)")
	flag.StringVar(&cfg.selfProfile, "self-cpuprofile", "", "write a CPU profile of this tool (client, fake, proxy) to this file")
	flag.DurationVar(&cfg.idleWait, "idle-wait", 15*time.Second, "how long weft sits idle before its idle RSS is read (weft frees memory after ~10 s idle; Go forces a GC every 2 minutes)")
	flag.BoolVar(&cfg.keepLog, "keep-weft-log", false, "copy weft's log (one line per request, with its duration) next to the results")
	flag.DurationVar(&cfg.timeout, "timeout", 20*time.Minute, "give up after this long")
	var floorMode, floorSource string
	flag.StringVar(&floorMode, "floor-child", "", "internal: run as the relay-floor child (read or relay) of the relay step")
	flag.StringVar(&floorSource, "floor-source", "", "internal: the relay-floor child's paced stream")
	flag.Parse()
	if floorMode != "" {
		if err := floorChild(floorMode, floorSource); err != nil {
			fmt.Fprintln(os.Stderr, "bench: floor child:", err)
			os.Exit(1)
		}
		return
	}
	cfg.modes = map[string]bool{}
	for _, m := range strings.Split(modes, ",") {
		if m = strings.TrimSpace(m); m != "" {
			cfg.modes[m] = true
		}
	}
	for _, s := range strings.Split(streams, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintln(os.Stderr, "bench: bad -streams:", s)
			os.Exit(2)
		}
		cfg.streams = append(cfg.streams, n)
	}
	if cfg.rate <= 0 || cfg.perUser <= 0 || cfg.latencyConc <= 0 || cfg.latencySends <= 0 || cfg.relayAnswers <= 0 {
		fmt.Fprintln(os.Stderr, "bench: counts and rates must be positive")
		os.Exit(2)
	}
	cfg.weftEnv, cfg.pgSet, cfg.sqlAfter = weftEnv, pgSet, sqlAfter
	if err := compare(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// compare runs the bench on cfg.compare's commit first (when set), then on
// cfg.rev or the working tree, and prints the summaries side by side.
func compare(cfg config) error {
	if cfg.compare == "" {
		_, err := run(cfg)
		return err
	}
	if cfg.out != "" && !filepath.IsAbs(cfg.out) {
		repo, err := repoRoot()
		if err != nil {
			return err
		}
		cfg.out = filepath.Join(repo, cfg.out)
	}
	base := cfg
	base.rev = cfg.compare
	if cfg.out != "" {
		base.out = strings.TrimSuffix(cfg.out, ".txt") + "-base.txt"
	}
	bb, err := run(base)
	if err != nil {
		return fmt.Errorf("on %s: %w", cfg.compare, err)
	}
	bh, err := run(cfg)
	if err != nil {
		return err
	}
	var r report
	r.out = os.Stdout
	sideBySide(&r, cfg, bb, bh, "base first")
	if cfg.abba {
		// The same pair again in the other order: on a busy 2-core VM the
		// first run of a pair tends to do better than the second.
		again := cfg
		if cfg.out != "" {
			again.out = strings.TrimSuffix(cfg.out, ".txt") + "-new2.txt"
			base.out = strings.TrimSuffix(cfg.out, ".txt") + "-base2.txt"
		}
		bh2, err := run(again)
		if err != nil {
			return err
		}
		bb2, err := run(base)
		if err != nil {
			return fmt.Errorf("on %s: %w", cfg.compare, err)
		}
		sideBySide(&r, cfg, bb2, bh2, "new first")
	}
	if cfg.out != "" {
		f, err := os.OpenFile(cfg.out, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString(r.b.String())
		return err
	}
	return nil
}

func run(cfg config) (_ *bench, err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	repo, err := repoRoot()
	if err != nil {
		return nil, err
	}
	if cfg.out != "" && !filepath.IsAbs(cfg.out) {
		cfg.out = filepath.Join(repo, cfg.out)
	}
	cfg.profileDir = filepath.Join(repo, "bench", "results")
	if cfg.out != "" {
		cfg.profileDir = filepath.Dir(cfg.out)
	}
	raiseFileLimit()
	if cfg.selfProfile != "" {
		f, err := os.Create(cfg.selfProfile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}

	b := &bench{cfg: cfg, r: &report{out: os.Stdout}, tr: newTransport(), runID: strconv.FormatInt(time.Now().UnixNano()%1e9, 36)}
	defer func() {
		if err != nil {
			b.r.printf("\nFAILED: %v", err)
		}
		if cfg.out != "" {
			if werr := os.MkdirAll(filepath.Dir(cfg.out), 0o755); werr == nil {
				werr = os.WriteFile(cfg.out, []byte(b.r.b.String()), 0o644)
				if werr == nil {
					fmt.Println("\nresults written to", cfg.out)
				}
			}
		}
	}()

	tmp, err := os.MkdirTemp("", "weft-bench-")
	if err != nil {
		return nil, err
	}
	e := &env{tmp: tmp}
	b.e = e
	e.addCleanup(func() { _ = os.RemoveAll(tmp) })
	if cfg.keepLog {
		// Runs after weft has stopped, before the temp folder goes.
		e.addCleanup(func() {
			if b, err := os.ReadFile(e.weftLog); err == nil {
				_ = os.MkdirAll(cfg.profileDir, 0o755)
				_ = os.WriteFile(filepath.Join(cfg.profileDir, "weft.log"), b, 0o644)
			}
		})
	}
	defer e.close()
	defer b.tr.CloseIdleConnections()

	b.header(repo)
	start := time.Now()
	fmt.Fprintln(os.Stderr, "bench: building weft, starting postgres and the fake model…")
	bin, err := e.buildWeft(ctx, repo, cfg.rev, cfg.pprof)
	if err != nil {
		return nil, err
	}
	b.bin = bin
	if err := e.startPostgres(ctx, cfg.databaseURL); err != nil {
		return nil, err
	}
	if err := e.tunePostgres(ctx, cfg.pgSet); err != nil {
		return nil, err
	}
	e.poolMaxConns = cfg.poolMaxConns
	e.modelURL = ""
	if cfg.proxy {
		e.fake = fakeollama.Start(fakeollama.WithScript(e.script))
		e.addCleanup(e.fake.Close)
		if e.proxy, err = startProxy(e.fake.URL); err != nil {
			return nil, err
		}
		e.addCleanup(e.proxy.close)
		e.modelURL = e.proxy.URL
	} else {
		// The fake stamps each line itself as it writes it: no proxy hop
		// (two more syscalls and a goroutine wake-up per token on the
		// machine weft is measured on).
		e.fake = fakeollama.Start(fakeollama.WithScript(e.script), fakeollama.WithLineHook(func(line []byte, received time.Time) {
			stampLine(line, received.UnixNano())
		}))
		e.addCleanup(e.fake.Close)
		e.modelURL = e.fake.URL
	}
	if err := e.startWeft(ctx, bin, cfg.weftEnv, cfg.pprof); err != nil {
		return nil, err
	}
	if err := e.execSQL(ctx, cfg.sqlAfter); err != nil {
		return nil, err
	}
	from := "the working tree"
	if cfg.rev != "" {
		from = "commit " + cfg.rev
	}
	if cfg.pprof {
		from += ", with the pprof overlay"
	}
	b.r.printf("weft pid %d at %s, built from %s; model: fake Ollama (%s)", e.pid(), e.weftBase, from, stamper(cfg.proxy))
	if len(cfg.pgSet) > 0 || cfg.poolMaxConns > 0 || len(cfg.weftEnv) > 0 || len(cfg.sqlAfter) > 0 {
		b.r.printf("EXPERIMENT, not the product defaults: postgres %q, pool_max_conns %d, weft env %q, SQL after migration %q",
			cfg.pgSet, cfg.poolMaxConns, cfg.weftEnv, cfg.sqlAfter)
	}

	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"idle", b.idle}, {"latency", b.latency}, {"relay", b.relay}, {"concurrent", b.concurrent}, {"hostile", b.hostile},
		{"instances", b.instances},
	}
	for _, s := range steps {
		if !cfg.modes[s.name] {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: %s…\n", s.name)
		if err := s.fn(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s: %w (%v)", s.name, err, context.Cause(ctx))
			}
			return nil, fmt.Errorf("%s: %w\nweft log tail:\n%s", s.name, err, e.weftLogTail(20))
		}
		if !e.weftAlive() {
			return nil, fmt.Errorf("weft died during %s:\n%s", s.name, e.weftLogTail(30))
		}
	}
	if cfg.modes["concurrent"] {
		select {
		case <-time.After(cfg.idleWait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		rss, _ := memKB(e.pid())
		b.r.printf("\nweft RSS %s after the last concurrent step (idle again): %s (%s)", cfg.idleWait, mb(rss), memDetail(e.pid()))
	}
	b.summary()
	b.r.printf("\ntotal time %s", time.Since(start).Round(time.Second))
	return b, nil
}

func (b *bench) header(repo string) {
	r := b.r
	r.printf("Weft load bench — %s", time.Now().UTC().Format(time.RFC3339))
	commit, _ := exec.Command("git", "-C", repo, "rev-parse", "--short", "HEAD").Output()
	dirty, _ := exec.Command("git", "-C", repo, "status", "--porcelain", "--untracked-files=no").Output()
	state := ""
	if len(bytes.TrimSpace(dirty)) > 0 {
		state = " (with uncommitted changes)"
	}
	r.printf("commit %s%s; %s; tool GOMAXPROCS %d", strings.TrimSpace(string(commit)), state, runtime.Version(), runtime.GOMAXPROCS(0))
	r.printf("machine: %d CPUs (%s), %s memory", runtime.NumCPU(), cpuModel(), memTotal())
	r.printf("command: go run ./bench/load %s", strings.Join(os.Args[1:], " "))
	r.printf("Weft, PostgreSQL, the fake model (and the proxy with -proxy) and the client share this machine; CPU and RSS figures are weft's alone.")
}

func (b *bench) summary() {
	r := b.r
	r.section("summary against DESIGN §13")
	if b.cfg.modes["latency"] {
		r.printf("added first-token latency p50 < 15 ms:   %s  (p50 %s one at a time); %d at a time %s (p50 %s)", verdict(b.firstTokenP50 < 15*time.Millisecond), strings.TrimSpace(ms(b.firstTokenP50)),
			b.cfg.latencyConc, verdict(b.firstTokenConcP50 < 15*time.Millisecond), strings.TrimSpace(ms(b.firstTokenConcP50)))
	}
	if b.cfg.modes["relay"] {
		r.printf("relay < 50 µs CPU per token:              instant %s (%.1f µs), paced 1 ms %s (%.1f µs; floor %.1f), paced 20 ms %s (%.1f µs; floor %.1f)",
			verdict(b.relayInstantUS < 50), b.relayInstantUS, verdict(b.relayPacedUS < 50), b.relayPacedUS, b.relayFloor1US,
			verdict(b.relayPaced20US < 50), b.relayPaced20US, b.relayFloor20US)
	}
	for _, c := range b.conc {
		r.printf("%5d streams at %d tok/s: p50 %s, p99 %s, VmHWM %s, %.1f µs CPU/token, %.2f cores, %d failed/incomplete, peak live %d",
			c.n, b.cfg.rate, strings.TrimSpace(ms(c.p50)), strings.TrimSpace(ms(c.p99)), mb(c.hwm), c.cpuPerTokUS, c.cores, c.failed, c.peak)
	}
	if b.cfg.modes["instances"] {
		r.printf("cross-instance delta p99 < 50 ms:         %s  (p50 %s, p99 %s); Stop across instances p99 %s",
			verdict(b.crossP99 > 0 && b.crossP99 < 50*time.Millisecond), strings.TrimSpace(ms(b.crossP50)), strings.TrimSpace(ms(b.crossP99)), strings.TrimSpace(ms(b.stopP99)))
	}
	if b.cfg.modes["idle"] {
		r.printf("idle RSS < 60 MB:                         %s  (%s)", verdict(float64(b.idleRSS) < 60*1024), mb(b.idleRSS))
	}
}

// repoRoot finds the weft module above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module weft\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run this inside the weft repository")
		}
		dir = parent
	}
}

// raiseFileLimit lifts the soft open-file limit to the hard one; weft,
// started afterwards, inherits it.
func raiseFileLimit() {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func memTotal() string {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return fmt.Sprintf("%.1f GB", float64(kb)/(1<<20))
		}
	}
	return "unknown"
}

// stamper says where the model's lines get their times.
func stamper(proxy bool) string {
	if proxy {
		return "stamped by a proxy in front of it"
	}
	return "stamping its lines as it writes them"
}
