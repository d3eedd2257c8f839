package handlers_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"weft/chat"
	"weft/db"
	"weft/handlers"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// apiUser is a signed-in person and their API token.
type apiUser struct {
	web   *testenv.Client
	user  db.User
	token string
}

// newAPIUser registers email and gives them a token with scopes (made the
// way /settings makes one).
func newAPIUser(t *testing.T, app *testenv.App, email string, scopes ...string) apiUser {
	t.Helper()
	c := testenv.NewClient(t, app.TS.URL)
	c.Register(email, password)
	u, err := app.Store.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	return apiUser{web: c, user: u, token: addToken(t, app.Store, u.ID, nil, scopes...)}
}

// addToken stores a token of the user and returns its value.
func addToken(t *testing.T, store *db.DB, user int64, expires *time.Time, scopes ...string) string {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	tok := "weft_" + base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(tok))
	if len(scopes) == 0 {
		scopes = []string{db.ScopeChat}
	}
	if _, err := store.CreateAPIToken(context.Background(), user, db.NewAPIToken{Name: "test", TokenSHA256: sum[:],
		TokenHint: tok[5:11], Scopes: scopes, ExpiresAt: expires}); err != nil {
		t.Fatal(err)
	}
	return tok
}

// openAIClient is the official client over Weft's API, with no retries
// (a refusal must be seen as it is).
func openAIClient(app *testenv.App, token string) openai.Client {
	return openai.NewClient(option.WithBaseURL(app.TS.URL+"/v1/"), option.WithAPIKey(token), option.WithMaxRetries(0))
}

// apiStatus is the HTTP status of an openai-go error (0: not an API error).
func apiStatus(err error) int {
	var e *openai.Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

func TestTheOpenAIClientGetsAWholeAnswerWithUsageThroughWeftsContextAssembly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	a := newAPIUser(t, app, "api@example.com")
	if err := store.SetInstructions(ctx, a.user.ID, "I am a chemist."); err != nil {
		t.Fatal(err)
	}
	client := openAIClient(app, a.token)

	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:       "tiny",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")},
		Temperature: openai.Float(0.2),
		MaxTokens:   openai.Int(50),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != "You said: hello there" {
		t.Fatalf("answer = %+v", resp.Choices)
	}
	if resp.Choices[0].FinishReason != "stop" || resp.Object != "chat.completion" || resp.Model != "tiny" {
		t.Errorf("finish %q object %q model %q", resp.Choices[0].FinishReason, resp.Object, resp.Model)
	}
	if resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens == 0 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
		t.Errorf("usage = %+v", resp.Usage)
	}
	reqs := app.Fake.Requests()
	last := reqs[len(reqs)-1]
	if last.NumCtx == 0 {
		t.Error("num_ctx was not sent")
	}
	msgs := last.Chat.Messages
	if len(msgs) != 2 || msgs[0].Role != "system" || !strings.Contains(msgs[0].Content, "I am a chemist.") || msgs[1].Content != "hello there" {
		t.Errorf("the model got %+v", msgs)
	}
	if last.Chat.Options["temperature"] != 0.2 || last.Chat.Options["num_predict"] != float64(50) {
		t.Errorf("options = %v", last.Chat.Options)
	}
}

func TestTheOpenAIClientStreamsAnAnswerAndItsUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	a := newAPIUser(t, app, "stream@example.com")
	client := openAIClient(app, a.token)

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "tiny",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("[[tokens:5]]")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != "tok1 tok2 tok3 tok4 tok5 " {
		t.Fatalf("streamed text = %q", got)
	}
	if chunks < 7 { // role, 5 pieces, the finish, usage
		t.Errorf("only %d chunks", chunks)
	}
	if acc.Usage.CompletionTokens != 5 || acc.Usage.PromptTokens == 0 {
		t.Errorf("usage = %+v", acc.Usage)
	}
	if acc.Choices[0].FinishReason != "stop" {
		t.Errorf("finish = %q", acc.Choices[0].FinishReason)
	}
}

func TestACallersToolIsCalledByTheModelAndItsResultAnswered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	a := newAPIUser(t, app, "tools@example.com")
	client := openAIClient(app, a.token)
	weather := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        "get_weather",
		Description: openai.String("The weather in a city"),
		Parameters: shared.FunctionParameters{"type": "object",
			"properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
	})
	params := openai.ChatCompletionNewParams{
		Model:    "toolie",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(`What is the weather? [[tool:get_weather {"city":"Paris"}]]`)},
		Tools:    []openai.ChatCompletionToolUnionParam{weather},
	}
	first, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	msg := first.Choices[0].Message
	if first.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 {
		t.Fatalf("first answer = %+v", first.Choices[0])
	}
	call := msg.ToolCalls[0]
	if call.Function.Name != "get_weather" || call.Function.Arguments != `{"city":"Paris"}` || call.ID == "" || call.Type != "function" {
		t.Fatalf("tool call = %+v", call)
	}
	if tools := app.Fake.Requests()[0].Chat.Tools; len(tools) != 1 || tools[0].Function.Name != "get_weather" {
		t.Fatalf("the model got tools %+v", tools)
	}

	// The caller runs its tool and sends the result back.
	params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage("Sunny, 21 °C", call.ID))
	second, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := second.Choices[0].Message.Content; got != "Done after 1 tool rounds. Last result: Sunny, 21 °C" {
		t.Fatalf("second answer = %q", got)
	}
	reqs := app.Fake.Requests()
	sent := reqs[len(reqs)-1].Chat.Messages
	tool := sent[len(sent)-1]
	if tool.Role != "tool" || tool.ToolCallID != call.ID || tool.ToolName != "get_weather" {
		t.Errorf("the tool result reached the model as %+v", tool)
	}
	if asst := sent[len(sent)-2]; len(asst.ToolCalls) != 1 || asst.ToolCalls[0].Function.Name != "get_weather" {
		t.Errorf("the assistant's call reached the model as %+v", asst)
	}

	// Streamed, the call arrives as a tool_calls delta.
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "toolie", Tools: params.Tools,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(`[[tool:get_weather {"city":"Oslo"}]]`)}})
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if tc := acc.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Arguments != `{"city":"Oslo"}` || acc.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("streamed tool calls = %+v", acc.Choices[0])
	}
}

func TestAClientThatLeavesMidStreamCancelsTheModelRequest(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	a := newAPIUser(t, app, "gone@example.com")
	client := openAIClient(app, a.token)

	ctx, cancel := context.WithCancel(context.Background())
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    "tiny",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("[[tokens:3]] [[hang]]")},
	})
	got := ""
	for got != "tok1 tok2 tok3 " && stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			got += c.Choices[0].Delta.Content
		}
	}
	if got != "tok1 tok2 tok3 " {
		t.Fatalf("before leaving, got %q (%v)", got, stream.Err())
	}
	cancel()
	_ = stream.Close()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := app.Fake.WaitCancelled(wctx, 1); err != nil {
		t.Fatalf("the model request was not cancelled: %v", err)
	}
}

func TestTokensAreRefusedWithoutScopeWhenExpiredRevokedOrTheirUserDisabled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	admin := newAPIUser(t, app, "admin@example.com")
	a := newAPIUser(t, app, "member@example.com", db.ScopeRead)
	ask := func(token string) error {
		client := openAIClient(app, token)
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "tiny",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		return err
	}

	// Read-only: the model list, but no answers.
	readOnly := openAIClient(app, a.token)
	if _, err := readOnly.Models.List(ctx); err != nil {
		t.Fatalf("a read-only token lists models: %v", err)
	}
	if err := ask(a.token); apiStatus(err) != http.StatusForbidden {
		t.Fatalf("a read-only token's completion = %v, want 403", err)
	}
	// Chat without kb: no knowledge bases.
	chatOnly := addToken(t, store, a.user.ID, nil, db.ScopeChat)
	chatClient := openAIClient(app, chatOnly)
	if _, err := chatClient.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "tiny",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}},
		option.WithJSONSet("weft", map[string]any{"knowledge_bases": []int64{1}})); apiStatus(err) != http.StatusForbidden {
		t.Fatalf("a chat token asking for knowledge bases = %v, want 403", err)
	}

	past := time.Now().Add(-time.Minute)
	expired := addToken(t, store, a.user.ID, &past, db.ScopeChat)
	if err := ask(expired); apiStatus(err) != http.StatusUnauthorized {
		t.Errorf("an expired token = %v, want 401", err)
	}
	if err := ask("weft_" + strings.Repeat("A", 43)); apiStatus(err) != http.StatusUnauthorized {
		t.Errorf("an unknown token = %v, want 401", err)
	}
	r := rawAPI(t, app, "GET", "/v1/models", "", "")
	if r.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") ||
		!strings.Contains(r.Body, `"type":"invalid_request_error"`) {
		t.Errorf("no token = %d %q %s", r.StatusCode, r.Header.Get("WWW-Authenticate"), r.Body)
	}

	// Revoked on /settings: the next request is refused.
	if err := ask(chatOnly); err != nil {
		t.Fatal(err)
	}
	toks, err := store.APITokens(ctx, a.user.ID)
	if err != nil {
		t.Fatal(err)
	}
	var chatID int64
	for _, tk := range toks {
		if tk.Has(db.ScopeChat) && tk.ExpiresAt == nil {
			chatID = tk.ID
		}
	}
	if r := admin.web.Post(fmt.Sprintf("/settings/tokens/%d/revoke", chatID), nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("another user revoking the token = %d, want 404", r.StatusCode)
	}
	if r := a.web.Post(fmt.Sprintf("/settings/tokens/%d/revoke", chatID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke = %d", r.StatusCode)
	}
	if err := ask(chatOnly); apiStatus(err) != http.StatusUnauthorized {
		t.Errorf("a revoked token = %v, want 401", err)
	}

	// A disabled user's tokens stop at once.
	other := addToken(t, store, a.user.ID, nil, db.ScopeChat)
	if err := ask(other); err != nil {
		t.Fatal(err)
	}
	if _, err := store.SetUserDisabled(ctx, admin.user.ID, a.user.ID, true); err != nil {
		t.Fatal(err)
	}
	if err := ask(other); apiStatus(err) != http.StatusUnauthorized {
		t.Errorf("a disabled user's token = %v, want 401", err)
	}
}

func TestATokenOverItsRateIsRefusedWithRetryAfter(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{HTTP: handlersConfigWithRate(3)})
	a := newAPIUser(t, app, "rate@example.com")
	for i := range 3 {
		if r := rawAPI(t, app, "GET", "/v1/models", a.token, ""); r.StatusCode != http.StatusOK {
			t.Fatalf("request %d = %d %s", i+1, r.StatusCode, r.Body)
		}
	}
	r := rawAPI(t, app, "GET", "/v1/models", a.token, "")
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" || !strings.Contains(r.Body, "rate_limit_exceeded") {
		t.Fatalf("the 4th request in a minute = %d %q %s", r.StatusCode, r.Header.Get("Retry-After"), r.Body)
	}
	// Another token of the same user has its own count.
	b := addToken(t, store, a.user.ID, nil)
	if r := rawAPI(t, app, "GET", "/v1/models", b, ""); r.StatusCode != http.StatusOK {
		t.Errorf("another token = %d", r.StatusCode)
	}
}

func TestBearerTokensAreIgnoredOnPagesAndCookiesOnTheAPI(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	a := newAPIUser(t, app, "pages@example.com")
	anon := testenv.NewClient(t, app.TS.URL)
	for _, path := range []string{"/", "/settings", "/kb"} {
		r := anon.DoHeader("GET", path, nil, http.Header{"Authorization": {"Bearer " + a.token}})
		if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/login" {
			t.Errorf("GET %s with a valid token and no session = %d %q, want a redirect to /login", path, r.StatusCode, r.Header.Get("Location"))
		}
	}
	// The signed-in browser's cookie is no credential on /v1.
	r := a.web.Get("/v1/models")
	if r.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/models with the session cookie only = %d, want 401", r.StatusCode)
	}
	// A cross-site POST with a token is an API call like any other (the
	// token is no ambient credential): not refused as cross-origin.
	x := rawAPIHeader(t, app, "POST", "/v1/embeddings", a.token, `{"model":"embedder","input":"x"}`,
		http.Header{"Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"}})
	if x.StatusCode != http.StatusOK {
		t.Errorf("a cross-site API call = %d %s", x.StatusCode, x.Body)
	}
}

func TestTheAPIRefusesBadRequestsInOpenAIsErrorShape(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	a := newAPIUser(t, app, "bad@example.com")
	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`{`, 400, "not valid JSON"},
		{`{"model":"tiny","messages":[]}`, 400, "at least one message"},
		{`{"model":"nope","messages":[{"role":"user","content":"hi"}]}`, 404, "model_not_found"},
		{`{"model":"embedder","messages":[{"role":"user","content":"hi"}]}`, 400, "not a chat model"},
		{`{"model":"tiny","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`, 400, "data: URLs"},
		{`{"model":"tiny","messages":[{"role":"robot","content":"hi"}]}`, 400, "role must be"},
		{`{"model":"tiny","n":2,"messages":[{"role":"user","content":"hi"}]}`, 400, "n must be 1"},
		{`{"model":"tiny","messages":[{"role":"user","content":"hi"}],"weft":{"workspace_id":999999}}`, 404, "workspace_not_found"},
	} {
		r := rawAPI(t, app, "POST", "/v1/chat/completions", a.token, c.body)
		if r.StatusCode != c.status || !strings.Contains(r.Body, c.want) || !strings.Contains(r.Body, `"error":{"message":`) {
			t.Errorf("%s = %d %s, want %d with %q", c.body, r.StatusCode, r.Body, c.status, c.want)
		}
	}
	if r := rawAPI(t, app, "GET", "/v1/nothing", a.token, ""); r.StatusCode != http.StatusNotFound || !strings.Contains(r.Body, "unknown_url") {
		t.Errorf("an unknown API path = %d %s", r.StatusCode, r.Body)
	}
}

func TestEmbeddingsAndModelsThroughTheOpenAIClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	a := newAPIUser(t, app, "embed@example.com")
	client := openAIClient(app, a.token)

	models, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, m := range models.Data {
		ids[m.ID] = true
	}
	if !ids["tiny:latest"] && !ids["tiny"] || !ids["embedder:latest"] && !ids["embedder"] {
		t.Errorf("models = %v", ids)
	}

	resp, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "embedder",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"one text", "another text"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 2 || len(resp.Data[0].Embedding) != 256 || resp.Data[1].Index != 1 || resp.Usage.PromptTokens == 0 {
		t.Fatalf("embeddings: %d items, first of %d, usage %+v", len(resp.Data), len(resp.Data[0].Embedding), resp.Usage)
	}
	// base64, as the client may ask.
	b64, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "embedder", EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64,
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("one text")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(b64.Data) != 1 || len(b64.Data[0].Embedding) != 256 || b64.Data[0].Embedding[0] != resp.Data[0].Embedding[0] {
		t.Errorf("base64 embedding differs: %d values", len(b64.Data[0].Embedding))
	}
	if _, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "tiny",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}}); apiStatus(err) != http.StatusBadRequest {
		t.Errorf("embeddings with a chat model = %v, want 400", err)
	}
}

// rawResponse is an API answer read whole.
type rawResponse struct {
	StatusCode int
	Header     http.Header
	Body       string
}

func rawAPI(t *testing.T, app *testenv.App, method, path, token, body string) rawResponse {
	return rawAPIHeader(t, app, method, path, token, body, nil)
}

func rawAPIHeader(t *testing.T, app *testenv.App, method, path, token, body string, h http.Header) rawResponse {
	t.Helper()
	req, err := http.NewRequest(method, app.TS.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawResponse{resp.StatusCode, resp.Header, string(b)}
}

func handlersConfigWithRate(perMinute int) handlers.Config {
	return handlers.Config{APIRate: perMinute}
}

func TestAPIAnswersCountAgainstThePerUserRunCap(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{Chat: chat.Config{PerUserRuns: 1}})
	a := newAPIUser(t, app, "cap@example.com")
	client := openAIClient(app, a.token)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "tiny",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("[[tokens:1]] [[hang]]")}})
	if !stream.Next() {
		t.Fatalf("the first answer did not start: %v", stream.Err())
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := app.Fake.WaitRequests(wctx, 1); err != nil {
		t.Fatal(err)
	}
	r := rawAPI(t, app, "POST", "/v1/chat/completions", a.token, `{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`)
	if r.StatusCode != http.StatusTooManyRequests || !strings.Contains(r.Body, "too_many_runs") {
		t.Fatalf("a second answer while one runs = %d %s, want 429", r.StatusCode, r.Body)
	}
	// Streamed too: refused before the stream begins.
	r = rawAPI(t, app, "POST", "/v1/chat/completions", a.token, `{"model":"tiny","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("a second streamed answer while one runs = %d %s, want 429", r.StatusCode, r.Body)
	}
	cancel()
	_ = stream.Close()
	if err := app.Fake.WaitCancelled(wctx, 1); err != nil {
		t.Fatal(err)
	}
	// The slot is free again once the first answer ended.
	if !testwait.Until(10*time.Second, func() bool {
		return rawAPI(t, app, "POST", "/v1/chat/completions", a.token, `{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`).StatusCode == http.StatusOK
	}) {
		t.Error("the run slot was not released")
	}
}

func TestAnImageAsADataURLReachesAVisionModel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	a := newAPIUser(t, app, "vision@example.com")
	client := openAIClient(app, a.token)
	png := testPNG(t, 4, 3)
	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "vision",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("What is in the picture?"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)}),
		})}})
	if err != nil {
		t.Fatal(err)
	}
	reqs := app.Fake.Requests()
	msgs := reqs[len(reqs)-1].Chat.Messages
	last := msgs[len(msgs)-1]
	if last.Content != "What is in the picture?" || len(last.Images) != 1 || string(last.Images[0]) != string(png) {
		t.Errorf("the model got %q with %d images", last.Content, len(last.Images))
	}
}
