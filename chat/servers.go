package chat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ollama/ollama/api"
)

// ParseOllamaHosts reads OLLAMA_HOST's value as a list of model servers
// separated by commas, each read the way Ollama reads OLLAMA_HOST
// (envconfig.Host, github.com/ollama/ollama v0.17.4): no scheme is http,
// no port is 11434 (80 for http://, 443 for https://), "ollama.com" is
// https://ollama.com:443. A value without a comma is one server, exactly
// as Ollama reads it. An empty item or a server listed twice is refused.
func ParseOllamaHosts(v string) ([]*url.URL, error) {
	var out []*url.URL
	seen := map[string]bool{}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" && strings.Contains(v, ",") {
			return nil, fmt.Errorf("OLLAMA_HOST %q has an empty server between its commas", v)
		}
		u := ollamaHost(item)
		if seen[u.String()] {
			return nil, fmt.Errorf("OLLAMA_HOST lists the server %s twice", u)
		}
		seen[u.String()] = true
		out = append(out, u)
	}
	return out, nil
}

// ollamaHost is envconfig.Host for one value.
func ollamaHost(s string) *url.URL {
	defaultPort := "11434"
	s = strings.Trim(strings.TrimSpace(s), "\"'")
	scheme, hostport, ok := strings.Cut(s, "://")
	switch {
	case !ok:
		scheme, hostport = "http", s
		if s == "ollama.com" {
			scheme, hostport = "https", "ollama.com:443"
		}
	case scheme == "http":
		defaultPort = "80"
	case scheme == "https":
		defaultPort = "443"
	}
	hostport, path, _ := strings.Cut(hostport, "/")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = "127.0.0.1", defaultPort
		if ip := net.ParseIP(strings.Trim(hostport, "[]")); ip != nil {
			host = ip.String()
		} else if hostport != "" {
			host = hostport
		}
	}
	if n, err := strconv.ParseInt(port, 10, 32); err != nil || n > 65535 || n < 0 {
		slog.Warn("invalid port, using default", "port", port, "default", defaultPort)
		port = defaultPort
	}
	return &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port), Path: path}
}

// Servers is several Ollama servers as one model server: the Chatter,
// Catalog and embedder the rest of Weft uses, over a client per server.
//
// Each model is served by the servers that have it. Which ones do is
// learnt from their /api/tags, read at Start, every Interval after, and
// on every List (the model picker's catalogue). A request goes to the
// server with the fewest requests in flight among the answering ones
// that have its model (ties in turn). A server that does not answer —
// its /api/tags fails, or a request cannot reach it — is taken out: no
// request goes to it while another server has the model, until its
// /api/tags answers again.
//
// A request that could not reach its server (the connection refused or
// cut before any answer) is sent to the next server that has the model,
// each server at most once. A request is never sent again once a part of
// its answer was delivered (no text twice), nor after the server refused
// it (a missing model, a context too long: the server's words are the
// answer). When no server that has the model answers, the error is an
// *UnreachableError naming them, which wraps the last connection error.
// A model no server is known to have goes, after the lists are read
// again, to the least busy answering server, whose own answer (usually
// "model not found") is returned.
type Servers struct {
	servers  []*server
	interval time.Duration
	probe    time.Duration

	mu sync.Mutex // guards the servers' state and next
	// next breaks ties between equally busy servers, in turn.
	next int

	readMu  sync.Mutex    // guards reading and readAt
	reading chan struct{} // closed when the reading of the lists under way ends
	readAt  time.Time     // when the last reading ended

	life   sync.Mutex // guards cancel, done and closed
	cancel context.CancelFunc
	done   chan struct{}
	closed bool
}

// server is one Ollama server and what is known of it (under Servers.mu).
type server struct {
	url    *url.URL
	name   string // short label: its host name, when unique among the servers
	client *OllamaClient

	up       bool
	known    bool                    // its list was read at least once
	models   map[string]bool         // canonical names of the models it has
	list     []api.ListModelResponse // its /api/tags, as read last
	inflight int
	served   int64 // requests sent to it
	checked  time.Time
	lastErr  error // why it is out
}

// ServersConfig tunes Servers.
type ServersConfig struct {
	// Interval is how often every server's model list is read (default
	// 10 s); a server that stopped answering is back at most this long
	// after it recovers.
	Interval time.Duration
	// ProbeTimeout bounds one server's /api/tags (default 2 s: the
	// catalogue gives its List and Shows 3 s in all).
	ProbeTimeout time.Duration
}

// NewServers returns the servers at urls (at least one), all taken as
// answering until their lists are read. Nothing runs until Start.
func NewServers(urls []*url.URL, cfg ServersConfig) *Servers {
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = 2 * time.Second
	}
	p := &Servers{interval: cfg.Interval, probe: cfg.ProbeTimeout}
	names := serverNames(urls)
	for i, u := range urls {
		p.servers = append(p.servers, &server{url: u, name: names[i], client: NewOllamaClient(u), up: true})
	}
	return p
}

// serverNames labels each server by its host name, or host:port when two
// share a host name, or its whole URL when two share that too.
func serverNames(urls []*url.URL) []string {
	count := func(f func(*url.URL) string) map[string]int {
		c := map[string]int{}
		for _, u := range urls {
			c[f(u)]++
		}
		return c
	}
	hosts, hostports := count((*url.URL).Hostname), count(func(u *url.URL) string { return u.Host })
	out := make([]string, len(urls))
	for i, u := range urls {
		switch {
		case hosts[u.Hostname()] == 1:
			out[i] = u.Hostname()
		case hostports[u.Host] == 1:
			out[i] = u.Host
		default:
			out[i] = u.String()
		}
	}
	return out
}

// Hosts is the servers' addresses, for messages: "http://a:11434, http://b:11434".
func (p *Servers) Hosts() string {
	hs := make([]string, len(p.servers))
	for i, s := range p.servers {
		hs[i] = s.url.String()
	}
	return strings.Join(hs, ", ")
}

// Start reads every server's list now and then every Interval, until
// Close.
func (p *Servers) Start() {
	p.life.Lock()
	defer p.life.Unlock()
	if p.cancel != nil || p.closed {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			p.Refresh(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Close stops the reading of the lists (requests still work).
func (p *Servers) Close() {
	p.life.Lock()
	defer p.life.Unlock()
	p.closed = true
	if p.cancel != nil {
		p.cancel()
		<-p.done
		p.cancel = nil
	}
}

// Refresh reads every server's model list (at once, each bounded by
// ProbeTimeout): a server that answers is in, with its models; one that
// does not is out. A reading already under way is waited for, then the
// lists are read again. A ctx that ends first changes nothing.
func (p *Servers) Refresh(ctx context.Context) { p.refresh(ctx, false) }

// refresh reads the lists, or with join takes the result of a reading
// already under way.
func (p *Servers) refresh(ctx context.Context, join bool) {
	for {
		p.readMu.Lock()
		running := p.reading
		if running == nil {
			running = make(chan struct{})
			p.reading = running
			p.readMu.Unlock()
			p.read(ctx)
			p.readMu.Lock()
			p.reading, p.readAt = nil, time.Now()
			p.readMu.Unlock()
			close(running)
			return
		}
		p.readMu.Unlock()
		select {
		case <-running:
		case <-ctx.Done():
			return
		}
		if join {
			return
		}
	}
}

// read reads every server's list.
func (p *Servers) read(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range p.servers {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, p.probe)
			defer cancel()
			list, err := s.client.List(pctx)
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			s.checked = time.Now()
			if err != nil {
				if s.up {
					slog.Warn("model server not answering: taken out", "server", s.url.String(), "err", err)
				}
				s.up, s.lastErr = false, err
				return
			}
			if !s.up {
				slog.Info("model server answering again: put back", "server", s.url.String())
			}
			s.up, s.known, s.lastErr = true, true, nil
			s.list = list.Models
			s.models = make(map[string]bool, len(list.Models))
			for _, m := range list.Models {
				s.models[canonicalModel(m.Name)] = true
			}
		})
	}
	wg.Wait()
}

// refreshSoon reads the lists again unless they were read less than a
// second ago: for a model no server is known to have (just pulled, or
// the lists not read yet).
func (p *Servers) refreshSoon(ctx context.Context) {
	p.readMu.Lock()
	recent := p.reading == nil && time.Since(p.readAt) < time.Second
	p.readMu.Unlock()
	if !recent {
		p.refresh(ctx, true)
	}
}

// List reads every server's list (or takes the reading under way) and
// returns their union: a model on several servers once, as the first
// server lists it. It fails only when no server answers. The reading is
// not cut short by ctx, so that its result is kept: it lasts at most
// ProbeTimeout.
func (p *Servers) List(ctx context.Context) (*api.ListResponse, error) {
	p.refresh(context.WithoutCancel(ctx), true)
	p.mu.Lock()
	defer p.mu.Unlock()
	out := &api.ListResponse{}
	seen := map[string]bool{}
	var down []string
	var lastErr error
	for _, s := range p.servers {
		if !s.up {
			down, lastErr = append(down, s.url.String()), s.lastErr
			continue
		}
		for _, m := range s.list {
			if c := canonicalModel(m.Name); !seen[c] {
				seen[c] = true
				out.Models = append(out.Models, m)
			}
		}
	}
	if len(down) == len(p.servers) {
		return nil, &UnreachableError{Servers: down, Err: lastErr}
	}
	return out, nil
}

// Where names the answering servers that have a model, in their order in
// OLLAMA_HOST (nil when none does).
func (p *Servers) Where(model string) []string {
	c := canonicalModel(model)
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, s := range p.servers {
		if s.up && s.models[c] {
			out = append(out, s.name)
		}
	}
	return out
}

// ServerStatus is one server as the administration page shows it.
type ServerStatus struct {
	Name, URL string
	Up        bool
	Known     bool // its list was read at least once
	Models    []string
	InFlight  int
	Served    int64
	Checked   time.Time // when its list was last read (zero: never)
	Error     string    // why it is out
}

// Status describes every server, in their order in OLLAMA_HOST.
func (p *Servers) Status() []ServerStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ServerStatus, len(p.servers))
	for i, s := range p.servers {
		st := ServerStatus{Name: s.name, URL: s.url.String(), Up: s.up, Known: s.known, InFlight: s.inflight,
			Served: s.served, Checked: s.checked}
		if s.lastErr != nil {
			st.Error = s.lastErr.Error()
		}
		for _, m := range s.list {
			st.Models = append(st.Models, m.Name)
		}
		slices.Sort(st.Models)
		out[i] = st
	}
	return out
}

// Chat sends the request to a server that has its model; see Servers.
func (p *Servers) Chat(ctx context.Context, req *api.ChatRequest, fn api.ChatResponseFunc) error {
	delivered := false
	return p.do(ctx, req.Model, func(c *OllamaClient) (bool, error) {
		err := c.Chat(ctx, req, func(r api.ChatResponse) error {
			delivered = true
			return fn(r)
		})
		return delivered, err
	})
}

// Embed sends the request to a server that has its model.
func (p *Servers) Embed(ctx context.Context, req *api.EmbedRequest) (resp *api.EmbedResponse, err error) {
	err = p.do(ctx, req.Model, func(c *OllamaClient) (bool, error) {
		resp, err = c.Embed(ctx, req)
		return false, err
	})
	return resp, err
}

// Show asks a server that has the model.
func (p *Servers) Show(ctx context.Context, req *api.ShowRequest) (resp *api.ShowResponse, err error) {
	err = p.do(ctx, req.Model, func(c *OllamaClient) (bool, error) {
		resp, err = c.Show(ctx, req)
		return false, err
	})
	return resp, err
}

// do runs call on the best server for model, and on the next ones while
// it could not reach them and delivered nothing.
func (p *Servers) do(ctx context.Context, model string, call func(*OllamaClient) (delivered bool, err error)) error {
	tried := map[*server]bool{}
	var failed []string
	var lastErr error
	for {
		s := p.pick(ctx, model, tried)
		if s == nil {
			return &UnreachableError{Model: model, Servers: failed, Err: lastErr}
		}
		tried[s] = true
		delivered, err := call(s.client)
		reached := err == nil || !unreached(err)
		p.mu.Lock()
		s.inflight--
		switch {
		case reached && !s.up:
			slog.Info("model server answering again: put back", "server", s.url.String())
			s.up, s.lastErr = true, nil
		case !reached && ctx.Err() == nil && s.up:
			slog.Warn("model server not answering: taken out", "server", s.url.String(), "err", err)
			s.up, s.lastErr = false, err
		}
		p.mu.Unlock()
		if reached || delivered || ctx.Err() != nil {
			return err
		}
		failed, lastErr = append(failed, s.url.String()), err
	}
}

// unreached reports whether a request failed before any answer of its
// server: the connection refused, timed out or cut. The server's
// refusals (api.StatusError) and its error lines are answers.
func unreached(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF)
}

// pick chooses the server for a request for model among those not tried
// yet, and counts the request in its load: the least busy answering
// server that has the model (ties in turn), else one that has it but was
// taken out (it may be back). When no server is known to have the model,
// the lists are read again first; if still none has it, the least busy
// answering server (else any), whose answer will say whether it has the
// model. Nil when every server that could serve it was tried.
func (p *Servers) pick(ctx context.Context, model string, tried map[*server]bool) *server {
	c := canonicalModel(model)
	has := func(s *server) bool { return s.models[c] }
	up := func(s *server) bool { return s.up && has(s) }
	if p.anyHas(c) {
		return p.choose(tried, up, has)
	}
	p.refreshSoon(ctx)
	if p.anyHas(c) {
		return p.choose(tried, up, has)
	}
	return p.choose(tried, func(s *server) bool { return s.up }, func(*server) bool { return true })
}

// anyHas reports whether a server, answering or not, is known to have
// the model of canonical name c.
func (p *Servers) anyHas(c string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.ContainsFunc(p.servers, func(s *server) bool { return s.models[c] })
}

// choose returns the least busy untried server passing first, else the
// least busy untried one passing second, counting the request in its
// load.
func (p *Servers) choose(tried map[*server]bool, first, second func(*server) bool) *server {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ok := range []func(*server) bool{first, second} {
		var best []*server
		for _, s := range p.servers {
			if tried[s] || !ok(s) {
				continue
			}
			if len(best) > 0 && s.inflight < best[0].inflight {
				best = best[:0]
			}
			if len(best) == 0 || s.inflight == best[0].inflight {
				best = append(best, s)
			}
		}
		if len(best) > 0 {
			s := best[p.next%len(best)]
			p.next++
			s.inflight++
			s.served++
			return s
		}
	}
	return nil
}

// UnreachableError is returned when no server that could serve a request
// answered. It wraps the last connection error (a *url.Error), so it is
// described like a single unreachable server, by the servers it names.
type UnreachableError struct {
	Model   string   // "" for a list
	Servers []string // the servers tried, or found not answering
	Err     error
}

func (e *UnreachableError) Error() string {
	if e.Model == "" {
		return fmt.Sprintf("no model server answers (%s): %v", strings.Join(e.Servers, ", "), e.Err)
	}
	return fmt.Sprintf("no model server that has %s answers (%s): %v", e.Model, strings.Join(e.Servers, ", "), e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Where is the servers the error is about, for messages.
func (e *UnreachableError) Where() string { return strings.Join(e.Servers, ", ") }
