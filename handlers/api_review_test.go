package handlers_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"weft/chat"
	"weft/handlers"
	"weft/internal/testenv"
)

func TestAStreamToAClientThatStopsReadingCancelsTheModelRequest(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{HTTP: handlers.Config{APIWriteTimeout: 300 * time.Millisecond}})
	a := newAPIUser(t, app, "stalled@example.com")

	// A client that keeps its connection open and never reads: its small
	// receive window fills, and the server's writes block.
	u, err := url.Parse(app.TS.URL)
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"tiny","stream":true,"messages":[{"role":"user","content":"[[tokens:200000]]"}]}`
	if _, err := fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		u.Host, a.token, len(body), body); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := app.Fake.WaitCancelled(ctx, 1); err != nil {
		t.Fatalf("the model kept generating for a client that stopped reading: %v", err)
	}
}

func TestDisablingAnAccountStopsItsRunningAPIAnswers(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	admin := newAPIUser(t, app, "admin@example.com")
	a := newAPIUser(t, app, "stopped@example.com")
	client := openAIClient(app, a.token)

	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "tiny",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("[[tokens:1]] [[hang]]")}})
	defer stream.Close()
	if !stream.Next() {
		t.Fatalf("the answer did not start: %v", stream.Err())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := app.Fake.WaitRequests(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if r := admin.web.Post(fmt.Sprintf("/admin/users/%d/disable", a.user.ID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable = %d", r.StatusCode)
	}
	if err := app.Fake.WaitCancelled(ctx, 1); err != nil {
		t.Fatalf("the disabled account's answer kept running: %v", err)
	}
	for stream.Next() {
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("the stream ended with %v, want the answer stopped", err)
	}
}

func TestAWholeAnswersCallerLeavingCancelsTheModelRequest(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	a := newAPIUser(t, app, "gone-whole@example.com")
	client := openAIClient(app, a.token)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "tiny",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("[[tokens:2]] [[hang]]")}})
		done <- err
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	if err := app.Fake.WaitChunks(wctx, 0, 2); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	if err := app.Fake.WaitCancelled(wctx, 1); err != nil {
		t.Fatalf("the model request was not cancelled: %v", err)
	}
}

func TestEmbeddingsTakeARunSlotOfTheAccount(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{Chat: chat.Config{PerUserRuns: 1}})
	a := newAPIUser(t, app, "embed-cap@example.com")
	client := openAIClient(app, a.token)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "tiny",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("[[tokens:1]] [[hang]]")}})
	defer stream.Close()
	if !stream.Next() {
		t.Fatalf("the answer did not start: %v", stream.Err())
	}
	r := rawAPI(t, app, "POST", "/v1/embeddings", a.token, `{"model":"embedder","input":"x"}`)
	if r.StatusCode != http.StatusTooManyRequests || !strings.Contains(r.Body, "too_many_runs") || r.Header.Get("Retry-After") == "" {
		t.Fatalf("embeddings while the account's runs are all taken = %d %s, want 429", r.StatusCode, r.Body)
	}
}

func TestATokenWithTheKBScopeButNotChatIsRefusedAtCreation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	a := newAPIUser(t, app, "kbonly@example.com")
	// kb only adds knowledge bases to answers, which need chat: a token
	// of kb alone could do nothing at all.
	r := a.web.Post("/settings/tokens", url.Values{"name": {"kb only"}, "scope": {"kb"}, "expires": {"7d"}})
	if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "chat") {
		t.Errorf("a kb-only token = %d, want 422 saying it needs chat", r.StatusCode)
	}
	toks, err := store.APITokens(ctx, a.user.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 1 {
		t.Errorf("%d tokens, want only the first one", len(toks))
	}
	if r := a.web.Post("/settings/tokens", url.Values{"name": {"kb"}, "scope": {"chat", "kb"}, "expires": {"7d"}}); r.StatusCode != http.StatusOK {
		t.Errorf("a chat and kb token = %d", r.StatusCode)
	}
}
