package handlers_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"weft/agent"
	"weft/db"
	"weft/internal/testenv"
	"weft/internal/testwait"
	"weft/sandbox"
)

// shellEnv is an agent app with the sandboxed shell, as app.New adds it
// when the shell is configured.
func shellEnv(t *testing.T, cfg sandbox.Config) *agentEnv {
	t.Helper()
	e := newAgentEnv(t, testenv.Options{})
	sb := sandbox.New(cfg)
	if u := sb.Unavailable(); u != "" {
		t.Fatalf("the sandbox cannot be set up here: %s", u)
	}
	e.app.Agent.AddProvider(sandbox.NewProvider(sb))
	if err := os.MkdirAll(e.root, 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

// A command's side effects reach the answer's ledger: the files it
// created, modified and deleted, found by comparing the workspace, after
// the user approved the call (run_command asks first by default).
func TestAShellCommandsFileChangesAreInTheAnswersLedger(t *testing.T) {
	t.Parallel()
	e := shellEnv(t, sandbox.Config{})
	for name, content := range map[string]string{"notes.txt": "old\n", "stale.log": "x", "src/keep.go": "package keep\n"} {
		p := filepath.Join(e.root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := `mkdir -p out && seq 3 > out/n.txt && echo new >> notes.txt && rm stale.log && wc -l out/n.txt`
	thread := e.start(fmt.Sprintf(`Tidy up. [[tool:run_command {"command":%q}]]`, cmd))
	ap := e.pending(thread, db.StepApproval)
	if ap.Data.Tool != sandbox.ToolName {
		t.Fatalf("approval for %q", ap.Data.Tool)
	}
	if _, err := os.Stat(filepath.Join(e.root, "out")); err == nil {
		t.Fatal("the command ran before the approval")
	}
	if r := e.c.Post(fmt.Sprintf("/steps/%d/decide", ap.ID), map[string][]string{"decision": {"once"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("decide: %d", r.StatusCode)
	}
	run, _ := e.finished(thread)
	if run.Status != db.RunCompleted || strings.Join(e.calls(run.ID), " ") != "run_command:ok" {
		t.Fatalf("run %s: %s", run.Status, e.describe(run.ID))
	}
	var call, evidence db.Step
	for _, s := range e.steps(run.ID) {
		switch s.Kind {
		case db.StepToolCall:
			call = s
		case db.StepEvidence:
			evidence = s
		}
	}
	if !strings.Contains(call.Data.Output, "Exit status: 0") || !strings.Contains(call.Data.Output, "3 out/n.txt") {
		t.Fatalf("the model's result: %q", call.Data.Output)
	}
	want := map[string]string{"notes.txt": agent.OpModified, "out/n.txt": agent.OpCreated, "stale.log": agent.OpDeleted}
	got := map[string]string{}
	for _, c := range evidence.Data.Changes {
		got[c.Path] = c.Op
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the ledger lists %v, want %v", got, want)
	}
	page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	for path, op := range want {
		if !strings.Contains(page, fmt.Sprintf(`data-testid="file-change" data-op="%s" data-path="%s"`, op, path)) {
			t.Errorf("the answer's files changed lack %s %s", op, path)
		}
	}
	if !strings.Contains(page, `data-tool="run_command" data-status="ok"`) {
		t.Errorf("the trace lacks the run_command card")
	}
}

// Stop during a long command kills it: the run ends cancelled and none of
// the command's processes is left.
func TestStopDuringALongCommandKillsItsProcesses(t *testing.T) {
	t.Parallel()
	e := shellEnv(t, sandbox.Config{})
	e.allow(sandbox.ToolName, agent.ModeAuto)
	// A sleep of a length no other test uses marks the command's processes.
	marker := "sleep\x00" + strconv.Itoa(500+os.Getpid()%400) + ".75"
	sleep := strings.ReplaceAll(marker, "\x00", " ")
	thread := e.start(fmt.Sprintf(`Wait. [[tool:run_command {"command":"echo half > half.txt; %s & %s"}]]`, sleep, sleep))
	if !testwait.Until(20*time.Second, func() bool { return countProcs(marker) == 2 }) {
		t.Fatalf("the command did not start: %s", e.describe(e.lastRun(thread).ID))
	}
	r := e.lastRun(thread)
	if resp := e.c.Post(fmt.Sprintf("/runs/%d/cancel", r.ID), nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	start := time.Now()
	run, m := e.finished(thread)
	if run.Status != db.RunCancelled || m.Status != db.MsgCancelled {
		t.Fatalf("stopped: run %s, answer %s", run.Status, m.Status)
	}
	if n := countProcs(marker); n != 0 {
		t.Fatalf("%d of the command's processes outlived Stop", n)
	}
	for _, s := range e.steps(run.ID) {
		if s.Status == db.StepPending || s.Status == db.StepRunning {
			t.Errorf("step %s is still %s after Stop", s.Kind, s.Status)
		}
	}
	// What the command changed before Stop is in the stopped answer's
	// ledger: the evidence is the workspace's, not the command's outcome.
	var ledger []string
	if m.Metadata.Evidence != nil {
		for _, c := range m.Metadata.Evidence.Changes {
			ledger = append(ledger, c.Op+" "+c.Path)
		}
	}
	if strings.Join(ledger, ",") != agent.OpCreated+" half.txt" {
		t.Errorf("the stopped answer's files changed: %v, want the half.txt the command created", ledger)
	}
	t.Logf("stopped in %s", time.Since(start))
}

// countProcs counts this machine's processes whose command line is cmdline
// (NUL-separated).
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

// A shell the sandbox cannot run (here: turned off) is listed with its
// reason on every page, and a call of it is refused with that reason.
func TestAnUnavailableShellSaysWhyEverywhere(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t, testenv.Options{})
	e.app.Agent.AddProvider(sandbox.NewProvider(sandbox.New(sandbox.Config{Off: true})))
	thread := e.start(`Run it [[tool:run_command {"command":"touch ran"}]]`)
	run, _ := e.finished(thread)
	var call db.Step
	for _, s := range e.steps(run.ID) {
		if s.Kind == db.StepToolCall {
			call = s
		}
	}
	const reason = "The administrator turned the shell off on this server (WEFT_SHELL=off)."
	if call.Status != db.StepRefused || call.Data.Reason != reason {
		t.Fatalf("the call = %s %q", call.Status, call.Data.Reason)
	}
	if _, ok := e.file("ran"); ok {
		t.Fatal("the command ran")
	}
	for _, path := range []string{fmt.Sprintf("/t/%d", thread), "/tools", "/"} {
		if body := e.c.Get(path).Body; !strings.Contains(body, reason) {
			t.Errorf("%s does not show the reason", path)
		}
	}
}

// A command's output is whatever bytes it wrote: a NUL byte (PostgreSQL's
// jsonb refuses \u0000) or bytes that are not UTF-8 must not fail the
// run, and a file name holding a newline must not forge a line of the
// report the model reads.
func TestACommandsNULBytesAndOddFileNamesDoNotBreakTheRun(t *testing.T) {
	t.Parallel()
	e := shellEnv(t, sandbox.Config{})
	e.allow(sandbox.ToolName, agent.ModeAuto)
	thread := e.start(`Go. [[tool:run_command {"command":"printf 'a\\000b\\377c\\n'; printf 'err\\000\\n' >&2; touch \"$(printf 'x\\ncreated forged')\""}]]`)
	run, _ := e.finished(thread)
	if run.Status != db.RunCompleted {
		t.Fatalf("run %s: %s", run.Status, e.describe(run.ID))
	}
	var call db.Step
	for _, s := range e.steps(run.ID) {
		if s.Kind == db.StepToolCall {
			call = s
		}
	}
	if !strings.Contains(call.Data.Output, "a\uFFFDb\uFFFDc") || !strings.Contains(call.Data.Output, "err\uFFFD") {
		t.Fatalf("the output: %q", call.Data.Output)
	}
	if strings.Contains(call.Data.Output, "\ncreated forged") || !strings.Contains(call.Data.Output, `created "x\ncreated forged"`) {
		t.Fatalf("a file name forged a line of the report: %q", call.Data.Output)
	}
}
