package fakeollama

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ollama/ollama/api"
)

// Managing models: /api/pull (streamed progress from a registry of the
// fake's own), /api/delete and /api/generate (load and unload), in the
// shapes of Ollama v0.17.4's PullHandler, DeleteHandler and
// GenerateHandler.
//
// A pull streams, as Ollama does: "pulling manifest"; for each layer
// "pulling <12 hex digits of its digest>" with digest, total and
// completed (Steps+1 lines, from 0 to total); "verifying sha256 digest";
// "writing manifest"; "success". The model is in /api/tags from "writing
// manifest" on. A name the registry does not know, and that the fake does
// not already have, fails after "pulling manifest" with the line
// {"error":"pull model manifest: file does not exist"}, as Ollama's does
// for a model the registry lacks (status 200: the stream had begun). A
// model the fake already has is pulled again at once (its one layer is
// cached: completed = total).
//
// Tests pace pulls with HoldPulls (every pull stops after n lines until
// ReleasePulls, or until its client goes away) and WithPullDelay, and read
// what happened with Pulls and WaitPulls.

// PullModel is a model the fake's registry offers to /api/pull.
type PullModel struct {
	// Model is what the fake has once the pull succeeded (Name required;
	// the defaults of WithModels apply).
	Model
	// Layers are the sizes of its layers in bytes (default: one layer of
	// 4,000,000 bytes).
	Layers []int64
	// Steps is how many progress lines each layer takes after its first
	// (default 4).
	Steps int
}

// WithRegistry sets the models /api/pull can fetch.
func WithRegistry(ms ...PullModel) Option {
	return func(s *Server) { s.registry = append([]PullModel(nil), ms...) }
}

// WithPullDelay waits d before each line of a pull after the first.
func WithPullDelay(d time.Duration) Option {
	return func(s *Server) { s.pullDelay = d }
}

// PullRecord is what the fake saw of one /api/pull request.
type PullRecord struct {
	Model     string
	Lines     int  // lines sent (progress and error)
	Done      bool // the request ended
	Completed bool // "success" was sent
	Cancelled bool // the client went away before the end
	Error     string
}

// Pulls returns every /api/pull request received so far, in order.
func (s *Server) Pulls() []PullRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.pulls)
}

// WaitPulls blocks until cond holds for the pulls recorded so far, or ctx
// ends. cond is called with the fake's lock held (see WaitFor).
func (s *Server) WaitPulls(ctx context.Context, cond func(pulls []PullRecord) bool) error {
	return s.wait(ctx, func() bool { return cond(s.pulls) })
}

// HoldPulls makes every pull, running or to come, stop after sending n
// lines (n <= 0: no hold) until ReleasePulls, the client going away,
// SetDown(true) or Close. A pull held at fewer lines goes on to n.
func (s *Server) HoldPulls(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdAt = n
	if s.release != nil {
		close(s.release) // held pulls look at the new n
	}
	s.release = make(chan struct{})
	s.notifyLocked()
}

// ReleasePulls lets held pulls go on, and ends the hold.
func (s *Server) ReleasePulls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdAt = 0
	if s.release != nil {
		close(s.release)
		s.release = nil
	}
	s.notifyLocked()
}

// catalogue is a copy of the models the fake has now.
func (s *Server) catalogue() []Model {
	s.catMu.RLock()
	defer s.catMu.RUnlock()
	return slices.Clone(s.models)
}

// addModel makes m one of the fake's models (replacing one of that name).
func (s *Server) addModel(m Model) {
	withDefaults(&m)
	s.catMu.Lock()
	defer s.catMu.Unlock()
	c := canonical(m.Name)
	s.models = slices.DeleteFunc(s.models, func(x Model) bool { return canonical(x.Name) == c })
	s.models = append([]Model{m}, s.models...) // the most recent first, as Ollama lists
}

// removeModel deletes a model; false when the fake does not have it.
func (s *Server) removeModel(name string) (Model, bool) {
	s.catMu.Lock()
	defer s.catMu.Unlock()
	c := canonical(name)
	i := slices.IndexFunc(s.models, func(x Model) bool { return canonical(x.Name) == c })
	if i < 0 {
		return Model{}, false
	}
	m := s.models[i]
	s.models = slices.Delete(s.models, i, i+1)
	return m, true
}

func (s *Server) registryModel(name string) (PullModel, bool) {
	c := canonical(name)
	for _, p := range s.registry {
		if canonical(p.Name) == c {
			if len(p.Layers) == 0 {
				p.Layers = []int64{4_000_000}
			}
			if p.Steps <= 0 {
				p.Steps = 4
			}
			return p, true
		}
	}
	if m, ok := s.lookup(name); ok {
		return PullModel{Model: m, Layers: []int64{size(m.Name)}, Steps: 0}, true
	}
	return PullModel{}, false
}

// layerDigest is the digest of a pulled model's i-th layer.
func layerDigest(name string, i int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "fakeollama-layer:%s:%d", canonical(name), i))
	return "sha256:" + hex.EncodeToString(h[:])
}

// validName is a loose model.ParseName(...).IsValid(): a non-empty name
// without spaces or characters a registry name cannot hold.
func validName(name string) bool {
	return name != "" && !strings.ContainsAny(name, " \t\n\"'\\?#%*") && len(name) <= 350
}

func (s *Server) handlePull(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req api.PullRequest
	if !decodeBody(w, body, &req) {
		return
	}
	name := req.Model
	if name == "" {
		name = req.Name
	}
	if !validName(name) {
		writeError(w, http.StatusBadRequest, "invalid model name")
		return
	}
	s.mu.Lock()
	idx := len(s.pulls)
	s.pulls = append(s.pulls, PullRecord{Model: name})
	s.notifyLocked()
	down := s.downCh
	s.mu.Unlock()

	p := pullRun{s: s, idx: idx, w: w, rc: http.NewResponseController(w), ctx: r.Context(), down: down,
		stream: req.Stream == nil || *req.Stream}
	defer p.finish()
	pm, known := s.registryModel(name)
	if !p.send(api.ProgressResponse{Status: "pulling manifest"}) {
		return
	}
	if !known {
		p.fail("pull model manifest: file does not exist")
		return
	}
	for i, total := range pm.Layers {
		d := layerDigest(pm.Name, i)
		for k := 0; k <= pm.Steps; k++ {
			done := total
			if pm.Steps > 0 {
				done = total * int64(k) / int64(pm.Steps)
			}
			if !p.send(api.ProgressResponse{Status: "pulling " + d[7:19], Digest: d, Total: total, Completed: done}) {
				return
			}
		}
	}
	if !p.send(api.ProgressResponse{Status: "verifying sha256 digest"}) {
		return
	}
	s.addModel(pm.Model)
	if !p.send(api.ProgressResponse{Status: "writing manifest"}) {
		return
	}
	if p.send(api.ProgressResponse{Status: "success"}) {
		p.completed = true
	}
}

// pullRun writes one pull's lines.
type pullRun struct {
	s         *Server
	idx       int
	w         http.ResponseWriter
	rc        *http.ResponseController
	ctx       context.Context
	down      <-chan struct{}
	stream    bool
	lines     int
	last      api.ProgressResponse // non-streamed: the last line, sent at the end
	completed bool
	cancelled bool
	errText   string
}

// send writes one progress line, after the pause and any hold; false when
// the pull must stop (the client left, the server went down or closed).
func (p *pullRun) send(resp api.ProgressResponse) bool {
	if p.lines > 0 {
		if why := pause(p.ctx, p.down, p.s.closing, p.s.pullDelay); why != stopNone {
			p.stop(why)
			return false
		}
	}
	if why := p.hold(); why != stopNone {
		p.stop(why)
		return false
	}
	if p.stream {
		if p.lines == 0 {
			p.w.Header().Set("Content-Type", "application/x-ndjson")
			p.w.WriteHeader(http.StatusOK)
		}
		b, _ := json.Marshal(resp)
		if _, err := p.w.Write(append(b, '\n')); err != nil || p.rc.Flush() != nil {
			p.cancelled = true
			return false
		}
	}
	p.last = resp
	p.count()
	return true
}

// hold waits while the fake holds pulls at this pull's line count.
func (p *pullRun) hold() stop {
	for {
		p.s.mu.Lock()
		at, release := p.s.holdAt, p.s.release
		p.s.mu.Unlock()
		if at <= 0 || p.lines < at || release == nil {
			return stopNone
		}
		select {
		case <-release:
		case <-p.ctx.Done():
			return stopClient
		case <-p.down:
			return stopDown
		case <-p.s.closing:
			return stopClosed
		}
	}
}

func (p *pullRun) stop(why stop) {
	switch why {
	case stopClient:
		p.cancelled = true
	case stopDown:
		p.errText = "fake: server down"
		cutConnection(p.w)
	case stopClosed:
		p.errText = "fake: server closed"
		cutConnection(p.w)
	}
}

// fail ends the pull with an error: a line of the stream once it began
// (Ollama's streamResponse), else a 500.
func (p *pullRun) fail(msg string) {
	p.errText = msg
	if p.stream && p.lines > 0 {
		b, _ := json.Marshal(map[string]string{"error": msg})
		_, _ = p.w.Write(append(b, '\n'))
		_ = p.rc.Flush()
	} else {
		writeError(p.w, http.StatusInternalServerError, msg)
	}
	p.count()
}

func (p *pullRun) count() {
	p.lines++
	p.s.mu.Lock()
	p.s.pulls[p.idx].Lines = p.lines
	p.s.notifyLocked()
	p.s.mu.Unlock()
}

func (p *pullRun) finish() {
	if !p.stream && p.completed {
		writeJSON(p.w, http.StatusOK, p.last)
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	rec := &p.s.pulls[p.idx]
	rec.Done, rec.Completed, rec.Cancelled, rec.Error = true, p.completed, p.cancelled && !p.completed, p.errText
	p.s.notifyLocked()
}

// handleDelete is DeleteHandler: the model is gone from /api/tags; 200
// with no body. Like Ollama's, it leaves the model in /api/ps when it is
// loaded (until its keep-alive ends), and an unload of it is then 404.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req api.DeleteRequest
	if !decodeBody(w, body, &req) {
		return
	}
	name := req.Model
	if name == "" {
		name = req.Name
	}
	if !validName(name) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("name %q is invalid", name))
		return
	}
	m, ok := s.removeModel(name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", name))
		return
	}
	s.mu.Lock()
	s.deleted = append(s.deleted, displayName(m.Name))
	s.notifyLocked()
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// Deleted lists the models deleted through /api/delete, in order.
func (s *Server) Deleted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.deleted)
}

// handleGenerate answers what Weft uses /api/generate for: an empty
// prompt loads the model (done_reason "load"), with keep_alive 0 unloads
// it ("unload"). A prompt gets one non-streamed-looking line "fake".
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req api.GenerateRequest
	if !decodeBody(w, body, &req) {
		return
	}
	if req.Model == "" {
		writeError(w, http.StatusBadRequest, "model is required")
		return
	}
	m, ok := s.lookup(req.Model)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", req.Model))
		return
	}
	resp := api.GenerateResponse{Model: req.Model, CreatedAt: time.Now().UTC(), Done: true}
	switch {
	case req.Prompt == "" && req.KeepAlive != nil && req.KeepAlive.Duration == 0:
		s.unload(m)
		resp.DoneReason = "unload"
	case req.Prompt == "":
		s.touch(m, req.KeepAlive, numCtxOf(req.Options))
		resp.DoneReason = "load"
	default:
		s.touch(m, req.KeepAlive, numCtxOf(req.Options))
		resp.Response, resp.DoneReason = "fake", "stop"
	}
	writeJSON(w, http.StatusOK, resp)
}
