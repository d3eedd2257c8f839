package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/chat"
	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
	"weft/internal/usererr"
)

// chat.OllamaClient.Pull reads /api/pull like the official client: the
// same progress lines, the same errors (an error line, a refusal before
// the stream, a raw reply that is no JSON).
func TestOllamaPullGivesWhatTheOfficialClientGives(t *testing.T) {
	t.Parallel()
	fake := fakeollama.New(t, fakeollama.WithRegistry(fakeollama.PullModel{Model: fakeollama.Model{Name: "qwen3:8b"},
		Layers: []int64{1000, 20}, Steps: 3}))
	raw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = w.Write([]byte("{\"status\":\"pulling manifest\"}\r\n\nnot json\n"))
	}))
	t.Cleanup(raw.Close)
	type pull interface {
		Pull(ctx context.Context, req *api.PullRequest, fn api.PullProgressFunc) error
	}
	for _, tc := range []struct{ name, server, model string }{
		{"success", fake.URL, "qwen3:8b"},
		{"cached", fake.URL, "tiny"},
		{"not in the registry", fake.URL, "nope"},
		{"invalid name", fake.URL, "bad name"},
		{"raw lines", raw.URL, "x"},
	} {
		u, _ := url.Parse(tc.server)
		var got [2][]api.ProgressResponse
		var errs [2]string
		for i, c := range []pull{api.NewClient(u, http.DefaultClient), chat.NewOllamaClient(u)} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := c.Pull(ctx, &api.PullRequest{Model: tc.model}, func(r api.ProgressResponse) error {
				got[i] = append(got[i], r)
				return nil
			})
			cancel()
			if err != nil {
				errs[i] = err.Error()
			}
		}
		if !reflect.DeepEqual(got[0], got[1]) || errs[0] != errs[1] {
			t.Errorf("%s: official %v %q, weft %v %q", tc.name, got[0], errs[0], got[1], errs[1])
		}
		if tc.name == "success" && (len(got[1]) != 12 || got[1][11].Status != "success") {
			t.Errorf("success: %v", got[1])
		}
	}
}

// countingStore counts a runtime's writes of pull progress.
type countingStore struct {
	*db.DB
	saves atomic.Int64
}

func (s *countingStore) SaveModelPull(ctx context.Context, id int64, pr db.PullProgress) (bool, error) {
	s.saves.Add(1)
	return s.DB.SaveModelPull(ctx, id, pr)
}

// A pull's progress is written at most once a FlushEvery, not per line:
// 240 lines over about 1.2 s make one write a second, and the row ends
// with the whole of it.
func TestAPullWritesItsProgressAtMostOnceAFlushNotPerLine(t *testing.T) {
	t.Parallel()
	var counting *countingStore
	e := newEnvWrapped(t, chat.Config{FlushEvery: time.Second}, func(d *db.DB) chat.Store {
		counting = &countingStore{DB: d}
		return counting
	}, fakeollama.WithRegistry(fakeollama.PullModel{Model: fakeollama.Model{Name: "many"}, Layers: []int64{1 << 20}, Steps: 235}),
		fakeollama.WithPullDelay(5*time.Millisecond))
	if !e.user.IsAdmin() {
		t.Fatal("the env's user is not the administrator")
	}
	pulls, err := e.rt.Pulls().Pull(context.Background(), e.user.ID, "many", "")
	if err != nil || len(pulls) != 1 {
		t.Fatalf("pull: %v %v", pulls, err)
	}
	var p db.ModelPull
	testwait.For(t, "the pull to end", 20*time.Second, func() bool {
		p, err = e.store.ModelPull(context.Background(), e.user.ID, pulls[0].ID)
		return err == nil && !p.Running()
	})
	recs := e.fake.Pulls()
	if p.Status != db.PullCompleted || p.Completed != 1<<20 || p.Total != 1<<20 || len(recs) != 1 || recs[0].Lines != 240 {
		t.Fatalf("pull = %+v, fake %+v", p, recs)
	}
	took := p.FinishedAt.Sub(p.CreatedAt)
	if n := counting.saves.Load(); n > int64(took/time.Second)+1 {
		t.Fatalf("%d progress writes for 240 lines in %s", n, took)
	}
}

// rawEnv is a runtime whose one model server answers /api/pull with a
// handler of the test's (a hostile, broken or endless server), and its
// administrator.
type rawEnv struct {
	rt    *chat.Runtime
	store *db.DB
	admin db.User
	tags  atomic.Int64 // /api/tags requests
}

func newRawEnv(t *testing.T, flushEvery time.Duration, pull http.HandlerFunc) *rawEnv {
	t.Helper()
	e := &rawEnv{store: testenv.NewDB(t)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/tags", func(w http.ResponseWriter, _ *http.Request) {
		e.tags.Add(1)
		_, _ = w.Write([]byte(`{"models":[]}`))
	})
	mux.HandleFunc("POST /api/pull", pull)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	client := chat.NewOllamaClient(u)
	e.rt = chat.New(e.store, client, chat.NewModels(client, srv.URL, "", 0),
		chat.Config{Instance: t.Name(), FlushEvery: flushEvery})
	if err := e.rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		e.rt.Shutdown(ctx)
	})
	var err error
	if e.admin, _, err = e.store.CreateUser(context.Background(), "admin@example.com", "", "x"); err != nil || !e.admin.IsAdmin() {
		t.Fatalf("admin: %+v %v", e.admin, err)
	}
	return e
}

// What a model server's progress lines say is untrusted: a status with a
// NUL (which Postgres refuses in text) or markup, a digest of megabytes,
// endless distinct layers, sizes negative, past the total or near the
// int64 limit — the pull still ends as the server said (a NUL kept in
// the row made every write of it fail: the pull stayed "running" until a
// restart, refusing to be pulled again or deleted), its row holds short,
// clean text and sizes that add up.
func TestAHostileModelServersProgressIsCleanedAndBounded(t *testing.T) {
	t.Parallel()
	e := newRawEnv(t, 100*time.Millisecond, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		_ = enc.Encode(api.ProgressResponse{Status: "pulling \x00 <script>alert(1)</script> " + strings.Repeat("x", 10_000)})
		_ = enc.Encode(api.ProgressResponse{Status: "pulling a", Digest: "sha256:" + strings.Repeat("a", 1<<20), Total: 100, Completed: 50})
		for i := range 5000 {
			_ = enc.Encode(api.ProgressResponse{Status: "pulling", Digest: fmt.Sprintf("sha256:%064d", i), Total: math.MaxInt64 - int64(i), Completed: math.MaxInt64})
		}
		_ = enc.Encode(api.ProgressResponse{Status: "pulling b", Digest: "sha256:b\x00", Total: -7, Completed: -3})
		_ = enc.Encode(api.ProgressResponse{Status: "success"})
	})
	pulls, err := e.rt.Pulls().Pull(context.Background(), e.admin.ID, "hostile", "")
	if err != nil || len(pulls) != 1 {
		t.Fatalf("pull: %v %v", pulls, err)
	}
	var p db.ModelPull
	testwait.For(t, "the pull to end", 20*time.Second, func() bool {
		p, err = e.store.ModelPull(context.Background(), e.admin.ID, pulls[0].ID)
		return err == nil && !p.Running()
	})
	if p.Status != db.PullCompleted || p.Error != "" {
		t.Fatalf("pull ended %s %q", p.Status, p.Error)
	}
	if p.Layers > 300 || len(p.Digest) > 100 || len(p.StatusText) > 1000 || strings.ContainsRune(p.StatusText, 0) {
		t.Errorf("row holds %d layers, a digest of %d bytes, a status of %d bytes", p.Layers, len(p.Digest), len(p.StatusText))
	}
	if p.Total <= 0 || p.Completed < 0 || p.Completed > p.Total || p.Total > 1<<60 {
		t.Errorf("row says %d of %d bytes", p.Completed, p.Total)
	}
}

// "llama3.2" is "llama3.2:latest": one model is one running pull however
// it is typed, and deleting it from the list (which names it with its
// tag) is refused while it is being pulled.
func TestAModelTypedWithOrWithoutItsTagIsOnePull(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{}, fakeollama.WithRegistry(fakeollama.PullModel{Model: fakeollama.Model{Name: "many"}}))
	e.fake.HoldPulls(1)
	defer e.fake.ReleasePulls()
	pulls, err := e.rt.Pulls().Pull(context.Background(), e.user.ID, "many", "")
	if err != nil || len(pulls) != 1 {
		t.Fatalf("pull: %+v %v", pulls, err)
	}
	again, err := e.rt.Pulls().Pull(context.Background(), e.user.ID, "Many:latest", "")
	if msg, _ := usererr.Message(err); len(again) != 0 || !strings.Contains(msg, "already being pulled") {
		t.Fatalf("the same model again: %+v %v", again, err)
	}
	err = e.rt.Pulls().Delete(context.Background(), e.user.ID, "many:latest", "")
	if msg, _ := usererr.Message(err); !strings.Contains(msg, "cancel the pull first") {
		t.Fatalf("delete while pulling: %v", err)
	}
}

// A running pull's progress writes do not make the model catalogue read
// the servers again (only its end does): with the cache cleared on every
// write, every page would ask /api/tags once a second for as long as a
// pull of many gigabytes runs.
func TestAPullsProgressLeavesTheCatalogueCached(t *testing.T) {
	t.Parallel()
	e := newRawEnv(t, 50*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = w.Write([]byte(`{"status":"pulling manifest"}` + "\n"))
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done() // a long download
	})
	if _, err := e.rt.Models().List(context.Background()); err != nil {
		t.Fatal(err)
	}
	pulls, err := e.rt.Pulls().Pull(context.Background(), e.admin.ID, "big", "")
	if err != nil {
		t.Fatal(err)
	}
	// Ten progress writes, the catalogue read after each.
	var last time.Time
	saves := 0
	testwait.For(t, "ten progress writes", 20*time.Second, func() bool {
		p, err := e.store.ModelPull(context.Background(), e.admin.ID, pulls[0].ID)
		if err == nil && p.UpdatedAt != last {
			last, saves = p.UpdatedAt, saves+1
			_, _ = e.rt.Models().List(context.Background())
		}
		return saves >= 10
	})
	if n := e.tags.Load(); n > 2 {
		t.Fatalf("/api/tags was read %d times during ten progress writes", n)
	}
}

// finishFailingStore loses the first write of a pull's end, as when the
// database does not answer at that moment.
type finishFailingStore struct {
	*db.DB
	failed atomic.Bool
}

func (s *finishFailingStore) FinishModelPull(ctx context.Context, id int64, status string, pr db.PullProgress, errText string) error {
	if !s.failed.Swap(true) {
		return errors.New("database unreachable")
	}
	return s.DB.FinishModelPull(ctx, id, status, pr, errText)
}

// A pull whose end could not be written does not say "running" for ever
// (refusing that model's next pull and its deletion until a restart): the
// housekeeping of its instance marks it interrupted, and it can be pulled
// again.
func TestAPullWhoseEndWasNotSavedIsInterruptedAndCanBePulledAgain(t *testing.T) {
	t.Parallel()
	e := newEnvWrapped(t, chat.Config{HeartbeatEvery: 50 * time.Millisecond, StaleAfter: 500 * time.Millisecond},
		func(d *db.DB) chat.Store { return &finishFailingStore{DB: d} },
		fakeollama.WithRegistry(fakeollama.PullModel{Model: fakeollama.Model{Name: "many"}}))
	pulls, err := e.rt.Pulls().Pull(context.Background(), e.user.ID, "many", "")
	if err != nil || len(pulls) != 1 {
		t.Fatalf("pull: %v %v", pulls, err)
	}
	var p db.ModelPull
	testwait.For(t, "the pull to be settled", 20*time.Second, func() bool {
		p, err = e.store.ModelPull(context.Background(), e.user.ID, pulls[0].ID)
		return err == nil && !p.Running()
	})
	if p.Status != db.PullInterrupted || !strings.Contains(p.Error, "could not be saved") {
		t.Fatalf("pull = %s %q", p.Status, p.Error)
	}
	if again, err := e.rt.Pulls().Pull(context.Background(), e.user.ID, "many", ""); err != nil || len(again) != 1 {
		t.Fatalf("pull again: %v %v", again, err)
	}
}
