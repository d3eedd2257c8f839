package chat_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/envconfig"

	"weft/chat"
	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

func TestParseOllamaHostsReadsEachServerLikeOllama(t *testing.T) {
	// One value is read exactly as Ollama's envconfig.Host reads it.
	for _, v := range []string{"", "gpu1", "gpu1:1234", "http://gpu1", "https://gpu1", "gpu1:11434/ollama",
		"10.0.0.7", "[::1]:9999", "::1", "ollama.com", " 'gpu1:80' ", "gpu1:99999"} {
		t.Setenv("OLLAMA_HOST", v)
		got, err := chat.ParseOllamaHosts(v)
		if err != nil || len(got) != 1 || got[0].String() != envconfig.Host().String() {
			t.Errorf("%q: %v, %v; Ollama reads %s", v, got, err, envconfig.Host())
		}
	}
	got, err := chat.ParseOllamaHosts("gpu1, gpu2:9000 ,https://gpu3,10.0.0.4")
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, u := range got {
		s = append(s, u.String())
	}
	if want := []string{"http://gpu1:11434", "http://gpu2:9000", "https://gpu3:443", "http://10.0.0.4:11434"}; !slices.Equal(s, want) {
		t.Fatalf("several servers = %v, want %v", s, want)
	}
	for v, want := range map[string]string{
		"gpu1,,gpu2":      "empty server",
		"gpu1,":           "empty server",
		"gpu1,gpu1:11434": "twice",
	} {
		if _, err := chat.ParseOllamaHosts(v); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want it to say %q", v, err, want)
		}
	}
}

// pool starts the servers over fakes, without the background reading of
// their lists: tests read them with Refresh.
func pool(t *testing.T, fakes ...*fakeollama.Server) *chat.Servers {
	t.Helper()
	var urls []*url.URL
	for _, f := range fakes {
		u, err := url.Parse(f.URL)
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, u)
	}
	p := chat.NewServers(urls, chat.ServersConfig{})
	t.Cleanup(p.Close)
	p.Refresh(context.Background())
	return p
}

// label is how the servers name a fake: all listen on 127.0.0.1, so by
// host and port.
func label(f *fakeollama.Server) string { return strings.TrimPrefix(f.URL, "http://") }

func models(names ...string) fakeollama.Option {
	var ms []fakeollama.Model
	for _, n := range names {
		m := fakeollama.Model{Name: n}
		if strings.HasPrefix(n, "embed") {
			m.Capabilities = []string{fakeollama.CapEmbedding}
		}
		ms = append(ms, m)
	}
	return fakeollama.WithModels(ms...)
}

func say(t *testing.T, p *chat.Servers, model, content string) (string, error) {
	t.Helper()
	var b strings.Builder
	err := p.Chat(context.Background(), &api.ChatRequest{Model: model, Messages: []api.Message{{Role: "user", Content: content}}},
		func(r api.ChatResponse) error {
			b.WriteString(r.Message.Content)
			return nil
		})
	return b.String(), err
}

func TestServersListEveryModelOnceWithTheServersThatHaveIt(t *testing.T) {
	t.Parallel()
	a := fakeollama.New(t, models("tiny", "shared", "embedder"))
	b := fakeollama.New(t, models("shared:latest", "big:70b"))
	p := pool(t, a, b)
	list, err := p.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list.Models {
		names = append(names, m.Name)
	}
	if want := []string{"tiny:latest", "shared:latest", "embedder:latest", "big:70b"}; !slices.Equal(names, want) {
		t.Fatalf("models = %v, want %v", names, want)
	}
	m := chat.NewModels(p, p.Hosts(), "", 0)
	for model, want := range map[string][]string{
		"shared": {label(a), label(b)}, "tiny": {label(a)}, "BIG:70b": {label(b)}, "none": nil,
	} {
		if got := m.Where(model); !slices.Equal(got, want) {
			t.Errorf("where %s = %v, want %v", model, got, want)
		}
	}
	if names := m.ChatModels(context.Background()); !slices.Equal(names, []string{"big:70b", "shared:latest", "tiny:latest"}) {
		t.Errorf("chat models = %v", names)
	}
	if n := m.ContextLength(context.Background(), "big:70b"); n != 4096 {
		t.Errorf("context length of a model on the second server = %d (Show went to a server without it?)", n)
	}
	// One server down: its models leave the list, the others stay.
	a.SetDown(true)
	list, err = p.List(context.Background())
	if err != nil || len(list.Models) != 2 {
		t.Fatalf("with one server down: %v, %v", list, err)
	}
	if got := m.Where("shared"); !slices.Equal(got, []string{label(b)}) {
		t.Errorf("where shared with %s down = %v", label(a), got)
	}
	// Both down: the list fails like one unreachable server, naming both.
	b.SetDown(true)
	_, err = p.List(context.Background())
	var ue *url.Error
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), a.URL) || !strings.Contains(err.Error(), b.URL) {
		t.Fatalf("all down: err = %v, want a *url.Error naming both", err)
	}
}

func TestServersSpreadRequestsByLoad(t *testing.T) {
	t.Parallel()
	a := fakeollama.New(t, models("tiny", "embedder"))
	b := fakeollama.New(t, models("tiny", "embedder"))
	p := pool(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout)
	defer cancel()

	// Two answers at once go to different servers: the first to one of
	// them, the second to the one with nothing in flight.
	streams, stop := context.WithCancel(ctx)
	ended := make(chan error, 2)
	for i := range 2 {
		go func() {
			ended <- p.Chat(streams, &api.ChatRequest{Model: "tiny", Messages: []api.Message{{Role: "user", Content: "[[hang]]"}}},
				func(api.ChatResponse) error { return nil })
		}()
		testwait.For(t, "the stream to reach a server", 0, func() bool { return len(a.Requests())+len(b.Requests()) == i+1 })
	}
	if len(a.Requests()) != 1 || len(b.Requests()) != 1 {
		t.Fatalf("two concurrent streams: %d and %d requests, want one each", len(a.Requests()), len(b.Requests()))
	}
	if st := p.Status(); st[0].InFlight != 1 || st[1].InFlight != 1 {
		t.Fatalf("in flight: %+v", st)
	}
	stop()
	<-ended
	<-ended

	// Requests one after another take turns.
	for range 4 {
		if _, err := say(t, p, "tiny", "hello"); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.Requests()) != 3 || len(b.Requests()) != 3 {
		t.Fatalf("after 4 more in turn: %d and %d requests, want 3 each", len(a.Requests()), len(b.Requests()))
	}
	for range 4 {
		if _, err := p.Embed(ctx, &api.EmbedRequest{Model: "embedder", Input: "a text"}); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.EmbedRequests()) != 2 || len(b.EmbedRequests()) != 2 {
		t.Fatalf("4 embeddings: %d and %d, want 2 each", len(a.EmbedRequests()), len(b.EmbedRequests()))
	}
	if st := p.Status(); st[0].InFlight != 0 || st[1].InFlight != 0 || st[0].Served != 5 || st[1].Served != 5 {
		t.Fatalf("after the requests: %+v", st)
	}
}

func TestServersTakeOutAServerThatStopsAnsweringAndPutItBack(t *testing.T) {
	t.Parallel()
	a := fakeollama.New(t, models("tiny", "embedder"))
	b := fakeollama.New(t, models("tiny", "embedder"))
	p := pool(t, a, b)

	// a cuts every connection: the answer comes from b, without an error,
	// and a is out.
	a.SetDown(true)
	for i := range 3 {
		text, err := say(t, p, "tiny", "hello")
		if err != nil || text != "You said: hello" {
			t.Fatalf("answer %d with a down: %q, %v", i, text, err)
		}
	}
	if n := len(b.Requests()); n != 3 {
		t.Fatalf("b served %d answers, want all 3", n)
	}
	st := p.Status()
	if st[0].Up || st[0].Error == "" || !st[1].Up || st[0].Served != 1 {
		t.Fatalf("after a stopped answering: %+v (a should be out, tried once)", st)
	}
	if got := p.Where("tiny"); !slices.Equal(got, []string{label(b)}) {
		t.Fatalf("where tiny = %v", got)
	}
	// A refresh while it is still down keeps it out; once it answers,
	// the next refresh puts it back and it gets its share again.
	p.Refresh(context.Background())
	if p.Status()[0].Up {
		t.Fatal("a refresh put back a server that does not answer")
	}
	a.SetDown(false)
	p.Refresh(context.Background())
	if !p.Status()[0].Up {
		t.Fatal("a is answering again but still out")
	}
	for range 2 {
		if _, err := say(t, p, "tiny", "hello"); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.Requests()) != 1 || len(b.Requests()) != 4 {
		t.Fatalf("after a is back: a %d, b %d requests, want 1 and 4", len(a.Requests()), len(b.Requests()))
	}

	// Embeddings fail over the same way.
	b.SetDown(true)
	for range 2 {
		if _, err := p.Embed(context.Background(), &api.EmbedRequest{Model: "embedder", Input: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.EmbedRequests()) != 2 || p.Status()[1].Up {
		t.Fatalf("embeddings with b down: a got %d, b up %v", len(a.EmbedRequests()), p.Status()[1].Up)
	}
}

func TestServersFailOverFromAStoppedServer(t *testing.T) {
	t.Parallel()
	a := fakeollama.New(t, models("tiny"))
	b := fakeollama.New(t, models("tiny"))
	p := pool(t, a, b)
	a.Close() // the port refuses connections now
	text, err := say(t, p, "tiny", "hello")
	if err != nil || text != "You said: hello" {
		t.Fatalf("answer with a stopped: %q, %v", text, err)
	}
	if st := p.Status(); st[0].Up || len(b.Requests()) != 1 {
		t.Fatalf("a stopped server: %+v", st[0])
	}
	p.Refresh(context.Background())
	if st := p.Status(); st[0].Up || !strings.Contains(st[0].Error, "refused") {
		t.Fatalf("a stopped server, read again: %+v", st[0])
	}
}

func TestServersKeepTheBackgroundReadingOfTheLists(t *testing.T) {
	t.Parallel()
	a := fakeollama.New(t, models("tiny"))
	b := fakeollama.New(t, models("tiny"))
	ua, _ := url.Parse(a.URL)
	ub, _ := url.Parse(b.URL)
	p := chat.NewServers([]*url.URL{ua, ub}, chat.ServersConfig{Interval: 20 * time.Millisecond})
	p.Start()
	t.Cleanup(p.Close)
	testwait.For(t, "the first reading of the lists", 0, func() bool { return len(p.Where("tiny")) == 2 })
	a.SetDown(true)
	testwait.For(t, "a taken out", 0, func() bool { return !p.Status()[0].Up })
	a.SetDown(false)
	testwait.For(t, "a put back", 0, func() bool { return p.Status()[0].Up && len(p.Where("tiny")) == 2 })
	p.Close()
	p.Close() // twice is fine
}

func TestServersNeverSendAnAnswerTwice(t *testing.T) {
	t.Parallel()
	a := fakeollama.New(t, models("tiny"))
	b := fakeollama.New(t, models("tiny"))
	p := pool(t, a, b)
	// The first request goes to a; it is cut after two tokens: the
	// answer ends short (as with one server), and b is not asked.
	n := 0
	err := p.Chat(context.Background(), &api.ChatRequest{Model: "tiny", Messages: []api.Message{{Role: "user", Content: "[[slow:5ms]][[tokens:50]]"}}},
		func(r api.ChatResponse) error {
			if n++; n == 2 {
				a.SetDown(true)
			}
			return nil
		})
	if err != nil || n >= 50 || len(b.Requests()) != 0 || len(a.Requests()) != 1 {
		t.Fatalf("cut mid-answer: err %v, %d lines, a %d, b %d requests", err, n, len(a.Requests()), len(b.Requests()))
	}
	a.SetDown(false)
	// The server's refusals and error lines are answers: not sent again.
	for _, content := range []string{"[[error-before:500]]", "[[error-after:2]][[tokens:5]]"} {
		before := len(a.Requests()) + len(b.Requests())
		if _, err := say(t, p, "tiny", content); err == nil {
			t.Fatalf("%s: no error", content)
		}
		if after := len(a.Requests()) + len(b.Requests()); after != before+1 {
			t.Fatalf("%s: %d requests, want one", content, after-before)
		}
	}
	if st := p.Status(); !st[0].Up || !st[1].Up {
		t.Fatalf("a refusal took a server out: %+v", st)
	}
}

func TestServersExplainAModelNoAnsweringServerHas(t *testing.T) {
	t.Parallel()
	a := fakeollama.New(t, models("tiny", "only-a"))
	b := fakeollama.New(t, models("tiny"))
	p := pool(t, a, b)
	a.SetDown(true)
	_, err := say(t, p, "only-a", "hello")
	var ur *chat.UnreachableError
	var ue *url.Error
	if !errors.As(err, &ur) || !errors.As(err, &ue) || ur.Where() != a.URL {
		t.Fatalf("model only on a down server: %v (want an UnreachableError naming %s, wrapping a *url.Error)", err, a.URL)
	}
	if len(b.Requests()) != 0 {
		t.Fatal("a request for a model b does not have went to b")
	}
	// A model no server has: the server's own answer.
	_, err = say(t, p, "nowhere", "hello")
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 {
		t.Fatalf("a model on no server: %v, want Ollama's 404", err)
	}
	// A model just pulled is found: its request reads the lists again.
	c := fakeollama.New(t, models("fresh"))
	p2 := pool(t, b, c)
	if text, err := say(t, p2, "fresh", "hi"); err != nil || text != "You said: hi" {
		t.Fatalf("fresh: %q, %v", text, err)
	}
}

// The runtime over several servers: the answer of a model whose server is
// down says which server, and a model on the other is answered.
func TestARunOverSeveralServersNamesTheServerThatIsDown(t *testing.T) {
	t.Parallel()
	a := fakeollama.New(t, models("tiny", "only-a"))
	b := fakeollama.New(t, models("tiny"))
	p := pool(t, a, b)
	e := &env{t: t, store: testenv.NewDB(t), fake: a}
	rt := chat.New(e.store, p, chat.NewModels(p, p.Hosts(), "tiny", 0),
		chat.Config{Instance: t.Name(), OllamaHost: p.Hosts(), FlushEvery: 200 * time.Millisecond})
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rt.Shutdown(ctx)
	})
	e.rt = rt
	e.user, e.ws = e.newUser("user@example.com")
	a.SetDown(true)
	run, m := e.wait(e.send(0, "hello"))
	if run.Status != db.RunCompleted || m.Content != "You said: hello" {
		t.Fatalf("tiny with a down: run %s, %q, %q", run.Status, m.Content, m.Error)
	}
	sent, err := rt.Send(context.Background(), e.user.ID, chat.Input{WorkspaceID: e.ws.ID, Content: "hello", Model: "only-a"})
	if err != nil {
		t.Fatal(err)
	}
	run, m = e.wait(sent)
	if want := "Ollama is not reachable at " + a.URL + ". "; run.Status != db.RunFailed || !strings.HasPrefix(m.Error, want) {
		t.Fatalf("only-a with a down: run %s, error %q, want it to start %q", run.Status, m.Error, want)
	}
}

// A server that takes connections and never answers (a hung box) is out
// after ProbeTimeout; the catalogue still lists the other's models.
func TestServersLeaveOutAServerThatHangs(t *testing.T) {
	t.Parallel()
	hung, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: connections wait in its backlog
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hung.Close() })
	b := fakeollama.New(t, models("tiny"))
	ub, _ := url.Parse(b.URL)
	p := chat.NewServers([]*url.URL{{Scheme: "http", Host: hung.Addr().String()}, ub}, chat.ServersConfig{ProbeTimeout: 200 * time.Millisecond})
	t.Cleanup(p.Close)
	m := chat.NewModels(p, p.Hosts(), "", 0)
	if names := m.ChatModels(context.Background()); !slices.Equal(names, []string{"tiny:latest"}) {
		t.Fatalf("chat models with one server hung = %v", names)
	}
	if pr := m.Problem(context.Background()); pr != "" {
		t.Fatalf("problem with one of two servers hung: %q", pr)
	}
	if st := p.Status(); st[0].Up || !st[1].Up {
		t.Fatalf("status: %+v", st)
	}
	if text, err := say(t, p, "tiny", "hello"); err != nil || text != "You said: hello" {
		t.Fatalf("answer with a server hung: %q, %v", text, err)
	}
}
