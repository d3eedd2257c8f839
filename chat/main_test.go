package chat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"weft/chat"
	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is one test's runtime over a fresh database and a fake Ollama.
type env struct {
	t     *testing.T
	store *db.DB
	fake  *fakeollama.Server
	rt    *chat.Runtime
	user  db.User
	ws    db.Workspace
	wrap  func(*db.DB) chat.Store // the runtimes' store (nil: the database)
}

func newEnv(t *testing.T, cfg chat.Config, opts ...fakeollama.Option) *env {
	t.Helper()
	return newEnvWrapped(t, cfg, nil, opts...)
}

// newEnvWrapped is newEnv with a runtime whose store is wrap(the database),
// so a test can watch what the runtime writes.
func newEnvWrapped(t *testing.T, cfg chat.Config, wrap func(*db.DB) chat.Store, opts ...fakeollama.Option) *env {
	t.Helper()
	store := testenv.NewDB(t)
	fake := fakeollama.New(t, opts...)
	e := &env{t: t, store: store, fake: fake, wrap: wrap}
	e.rt = e.runtime(cfg)
	e.user, e.ws = e.newUser("user@example.com")
	return e
}

// runtime starts another runtime over the same database and fake.
func (e *env) runtime(cfg chat.Config) *chat.Runtime {
	e.t.Helper()
	if cfg.Instance == "" {
		cfg.Instance = e.t.Name()
	}
	if cfg.FlushEvery == 0 {
		cfg.FlushEvery = 200 * time.Millisecond
	}
	cfg.OllamaHost = e.fake.URL
	u, _ := url.Parse(e.fake.URL)
	client := chat.NewOllamaClient(u)
	var store chat.Store = e.store
	if e.wrap != nil {
		store = e.wrap(e.store)
	}
	rt := chat.New(store, client, chat.NewModels(client, e.fake.URL, "tiny", 0), cfg)
	if err := rt.Start(context.Background()); err != nil {
		e.t.Fatalf("start runtime: %v", err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rt.Shutdown(ctx)
	})
	return rt
}

func (e *env) newUser(email string) (db.User, db.Workspace) {
	e.t.Helper()
	u, ws, err := e.store.CreateUser(context.Background(), email, "", "x")
	if err != nil {
		e.t.Fatal(err)
	}
	return u, ws
}

// send posts a message as the env's user (thread 0: a new thread).
func (e *env) send(thread int64, content string) db.Sent {
	e.t.Helper()
	sent, err := e.rt.Send(context.Background(), e.user.ID, chat.Input{WorkspaceID: e.ws.ID, ThreadID: thread, Content: content})
	if err != nil {
		e.t.Fatalf("send %q: %v", content, err)
	}
	return sent
}

// wait polls until the run is no longer active and returns its answer.
func (e *env) wait(sent db.Sent) (db.Run, db.Message) {
	e.t.Helper()
	ctx := context.Background()
	var r db.Run
	if !testwait.Until(20*time.Second, func() bool {
		var err error
		if r, err = e.store.Run(ctx, e.user.ID, sent.Run.ID); err != nil {
			e.t.Fatal(err)
		}
		return !r.Active()
	}) {
		e.t.Fatalf("run %d still %s", r.ID, r.Status)
	}
	m, err := e.store.Message(ctx, e.user.ID, sent.Assistant.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return r, m
}

// message reads a message as the env's user.
func (e *env) message(id int64) db.Message {
	e.t.Helper()
	m, err := e.store.Message(context.Background(), e.user.ID, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func tokens(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "tok%d ", i)
	}
	return b.String()
}

// jsonUnmarshal decodes key of a JSON object ("" : the whole object).
func jsonUnmarshal(raw []byte, key string, v any) error {
	if key == "" {
		return json.Unmarshal(raw, v)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	return json.Unmarshal(m[key], v)
}
