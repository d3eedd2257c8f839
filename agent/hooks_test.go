package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"weft/internal/testwait"
)

func TestHookSignaturesAreHMACSHA256OfTheBody(t *testing.T) {
	// RFC 4231-style known answer (the Wikipedia HMAC example).
	got := Sign("key", []byte("The quick brown fox jumps over the lazy dog"))
	if got != "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8" {
		t.Fatalf("Sign = %s", got)
	}
}

func TestOnlyADenyAnswerStopsACall(t *testing.T) {
	for answer, want := range map[string]string{
		`{"decision": "deny", "reason": "not on Fridays"}`: "not on Fridays",
		` {"decision":"DENY"} `:                            "A policy hook denied this call.",
		`{"decision": "allow", "reason": "fine"}`:          "",
		`deny`:                   "",
		``:                       "",
		`{"decision": ["deny"]}`: "",
	} {
		denied, reason := denial([]byte(answer))
		if denied != (want != "") || reason != want {
			t.Errorf("%q: denied %v, reason %q", answer, denied, reason)
		}
	}
}

func TestWorkspaceHooksReachNoLocalAddressUnlessTheAdministratorAllowsIt(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got = r.Header.Clone()
		_, _ = io.WriteString(w, `{"decision": "deny", "reason": "local"}`)
	}))
	defer srv.Close()
	ctx := context.Background()
	ws := target{url: srv.URL, secret: "s", timeout: 5 * time.Second, wsHook: 1}
	if _, err := newSender(HooksConfig{}).send(ctx, ws, EventAgentEnd, "evt_1", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "private or local") {
		t.Fatalf("a workspace hook on 127.0.0.1 without leave: %v", err)
	}
	for _, allow := range []string{"127.0.0.1", "127.0.0.0/8", "localhost"} {
		u := srv.URL
		if allow == "localhost" {
			u = strings.Replace(u, "127.0.0.1", "localhost", 1)
		}
		t.Run(allow, func(t *testing.T) {
			w := ws
			w.url = u
			answer, err := newSender(HooksConfig{Allow: []string{allow}}).send(ctx, w, EventAgentEnd, "evt_1", []byte(`{}`))
			if err != nil || !strings.Contains(string(answer), "deny") {
				t.Fatalf("allowed %s: %q %v", allow, answer, err)
			}
			if got.Get("X-Weft-Signature") != Sign("s", []byte(`{}`)) || got.Get("X-Weft-Delivery") != "evt_1" || got.Get("X-Weft-Event") != EventAgentEnd {
				t.Fatalf("headers %v", got)
			}
		})
	}
	// The administrator's own hooks reach any address.
	admin := target{url: srv.URL, timeout: 5 * time.Second}
	if _, err := newSender(HooksConfig{}).send(ctx, admin, EventAgentEnd, "evt_2", []byte(`{}`)); err != nil {
		t.Fatalf("the administrator's hook: %v", err)
	}
	if got.Get("X-Weft-Signature") != "" {
		t.Errorf("a hook without a secret sent a signature")
	}
}

func TestACommandHookIsKilledWithItsChildrenAtItsTimeoutAndAFailureSaysWhy(t *testing.T) {
	s := newSender(HooksConfig{})
	start := time.Now()
	_, err := s.send(context.Background(), target{command: []string{"/bin/sh", "-c", "sleep 30 & sleep 30"}, timeout: 200 * time.Millisecond},
		EventToolExecutionStart, "evt_1", []byte(`{}`))
	if err == nil || err.Error() != "no answer within 200ms" {
		t.Fatalf("a slow command: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the slow command held the caller %s", took)
	}
	_, err = s.send(context.Background(), target{command: []string{"/bin/sh", "-c", "cat >/dev/null; echo nope >&2; exit 4"}, timeout: 5 * time.Second},
		EventAgentEnd, "evt_2", []byte(`{}`))
	// The status is shown; what it wrote on stderr (the administrator's
	// paths, secrets) only goes to the log.
	if err == nil || !strings.Contains(err.Error(), "exit status 4") || strings.Contains(err.Error(), "nope") {
		t.Fatalf("a failing command: %v", err)
	}
	out, err := s.send(context.Background(), target{command: []string{"/bin/sh", "-c", `echo "$WEFT_HOOK_EVENT $WEFT_HOOK_ID $(cat)"`}, timeout: 5 * time.Second},
		EventAgentEnd, "evt_3", []byte(`{"x":1}`))
	if err != nil || strings.TrimSpace(string(out)) != `agent_end evt_3 {"x":1}` {
		t.Fatalf("the command's stdin and environment: %q %v", out, err)
	}
}

func TestAHooksLabelNamesOnlyItsHostNeverTheTokenInItsPathOrQuery(t *testing.T) {
	for raw, want := range map[string]string{
		"https://hooks.slack.com/services/T000/B000/XXXXSECRET":      "POST https://hooks.slack.com",
		"https://discord.com/api/webhooks/123/SECRET?wait=true#frag": "POST https://discord.com",
		"http://user:pass@10.0.0.5:8080/hook?token=SECRET":           "POST http://10.0.0.5:8080",
	} {
		tg := adminTarget(Hook{Event: "*", URL: raw}, time.Second)
		if got := tg.label(); got != want {
			t.Errorf("label of %s = %q, want %q", raw, got, want)
		}
	}
}

func TestADeliveryAttemptOutlastsTheLongestHookTimeoutButNotTheQueuesRescue(t *testing.T) {
	if _, err := ParseHooks([]byte(`{"hooks": [{"event": "*", "url": "https://x.example/", "timeout": 300}]}`)); err != nil {
		t.Fatalf("a hook of the longest timeout: %v", err)
	}
	got := (&hookWorker{}).Timeout(nil)
	// The queue's defaults (internal/jobs): attempts end at 5 min, stuck
	// jobs are rescued at 6.
	if got <= 300*time.Second || got >= 6*time.Minute {
		t.Fatalf("an attempt is bounded by %s; a 300 s hook needs more, and the rescue comes at 6 min", got)
	}
}

func TestACommandHookThatLeavesAChildBehindAnswersAtOnceAndTheChildIsKilled(t *testing.T) {
	s := newSender(HooksConfig{})
	start := time.Now()
	// The child inherits stdout: it held the answer open (a failure
	// after exec's WaitDelay) and outlived the hook.
	out, err := s.send(context.Background(), target{command: []string{"/bin/sh", "-c", `sleep 30 & echo "$!"`}, timeout: 20 * time.Second},
		EventAgentEnd, "evt_1", []byte(`{}`))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("a command that left a child: %v", err)
	}
	if took > 900*time.Millisecond {
		t.Errorf("the answer waited %s for the child", took)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("the answer %q", out)
	}
	testwait.For(t, "the child killed", 10*time.Second, func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true // gone
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
	})
	// A child that left the group (setsid) holding stdout: the answer is
	// what came within a second of the command's exit.
	start = time.Now()
	out, err = s.send(context.Background(), target{command: []string{"/bin/sh", "-c", `setsid sleep 5 & sleep 0.3; echo answer`}, timeout: 20 * time.Second},
		EventAgentEnd, "evt_4", []byte(`{}`))
	if err != nil || strings.TrimSpace(string(out)) != "answer" {
		t.Fatalf("a command whose daemon holds stdout: %q %v", out, err)
	}
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Fatalf("the daemon held the answer %s", took)
	}
	// A command that never reads a payload larger than a pipe holds, and
	// never exits, is stopped at its timeout.
	big := []byte(`{"x":"` + strings.Repeat("a", 1<<20) + `"}`)
	start = time.Now()
	if _, err := s.send(context.Background(), target{command: []string{"/bin/sh", "-c", "exec sleep 30"}, timeout: 300 * time.Millisecond},
		EventAgentEnd, "evt_2", big); err == nil || err.Error() != "no answer within 300ms" {
		t.Fatalf("a command that reads nothing: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the command that reads nothing held the caller %s", took)
	}
	// One that exits without reading it answers.
	if out, err := s.send(context.Background(), target{command: []string{"/bin/echo", "fine"}, timeout: 5 * time.Second},
		EventAgentEnd, "evt_3", big); err != nil || strings.TrimSpace(string(out)) != "fine" {
		t.Fatalf("a command that exits without reading: %q %v", out, err)
	}
}
