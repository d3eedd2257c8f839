package main

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// healthcheckRun runs `weft healthcheck` with the server's environment.
func healthcheckRun(t *testing.T, env ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(weftBinary(t), "healthcheck")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		t.Fatal(err)
	}
	return 0, string(out)
}

// The container image has no curl: its HEALTHCHECK is the binary itself,
// run beside a server that listens on every address behind a public URL
// (as in compose.yaml).
func TestTheHealthCheckCommandReportsAReadyServerAndFailsWhenItIsGone(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	fake := fakeollama.New(t)
	port := strings.Split(freeAddr(t), ":")[1]
	env := []string{"WEFT_ADDR=0.0.0.0:" + port, "WEFT_PUBLIC_URL=http://weft.example.org",
		"DATABASE_URL=" + testenv.URLFor(t, store), "OLLAMA_HOST=" + fake.URL, "WEFT_DATA_DIR=" + t.TempDir()}

	cmd := exec.Command(weftBinary(t))
	cmd.Env = append(os.Environ(), env...)
	logs := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = &syncWriter{b: logs}, &syncWriter{b: logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })

	var last string
	if !testwait.Until(30*time.Second, func() bool {
		code, out := healthcheckRun(t, env...)
		last = out
		return code == 0
	}) {
		t.Fatalf("the health check never passed; last: %s\nserver log:\n%s", last, logs.String())
	}
	// The database gone: the server is up but not ready.
	stopDB(t, store)
	if !testwait.Until(20*time.Second, func() bool {
		code, out := healthcheckRun(t, env...)
		last = out
		return code == 1 && strings.Contains(out, "/readyz answered 503")
	}) {
		t.Fatalf("with the database gone the check still passes: %s", last)
	}

	_ = cmd.Process.Kill()
	<-done
	done <- nil
	code, out := healthcheckRun(t, env...)
	if code != 1 || !strings.Contains(out, "not reachable") {
		t.Fatalf("with the server gone the check exits %d: %s", code, out)
	}
}

func TestTheHealthCheckAsksTheListenAddressOrLoopback(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr   string
		tls    bool
		target string
	}{
		{"0.0.0.0:8080", false, "http://127.0.0.1:8080/readyz"},
		{":9000", true, "https://127.0.0.1:9000/readyz"},
		{"[::]:8080", false, "http://[::1]:8080/readyz"},
		{"10.0.0.5:8080", false, "http://10.0.0.5:8080/readyz"},
	} {
		target, err := healthTarget(c.addr, c.tls)
		if err != nil || target != c.target {
			t.Errorf("healthTarget(%q) = %q, %v; want %q", c.addr, target, err, c.target)
		}
	}
	if _, err := healthTarget("nonsense", false); err == nil {
		t.Error("a bad WEFT_ADDR was accepted")
	}
}

// stopDB makes the test's database unreachable: no new connections, and
// every open one ended (the test's cleanup still drops it).
func stopDB(t *testing.T, store *db.DB) {
	t.Helper()
	ctx := context.Background()
	name := store.Pool.Config().ConnConfig.Database
	u, err := url.Parse(testenv.URLFor(t, store))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/postgres"
	admin, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS false"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name); err != nil {
		t.Fatal(err)
	}
}
