package fakeollama

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/ollama/ollama/api"
)

// EmbedRecord is one /api/embed request as the fake saw it.
type EmbedRecord struct {
	Model string // the request's model, as sent ("" when the body did not decode)
	// Inputs is how many inputs the request carried: 1 for a non-empty
	// string, the length of an array (0 for "" or no input).
	Inputs int
	// Status is the HTTP status sent: 0 while the request runs, or when no
	// reply was sent (the client went away, SetDown, Close).
	Status int
}

// EmbedRequests returns every /api/embed request received so far, in
// arrival order, including ones still running (Status 0). /api/embeddings
// requests are not recorded.
func (s *Server) EmbedRequests() []EmbedRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]EmbedRecord(nil), s.embeds...)
}

// FailEmbeds makes the next n /api/embed requests fail with that status
// (500 when status is 0) and the body {"error":"fake: embedding failed"}
// (EmbedFailedText), whatever they contain, before any check and without
// the WithEmbedDelay wait, as a busy or crashing server would (503, 500...).
// It replaces the failures still pending from an earlier call; n <= 0
// cancels them.
func (s *Server) FailEmbeds(n int, status int) {
	if status == 0 {
		status = http.StatusInternalServerError
	}
	s.mu.Lock()
	s.failEmbeds, s.failStatus = max(n, 0), status
	s.mu.Unlock()
}

// EmbedFailedText is the error text of the failures injected by FailEmbeds.
const EmbedFailedText = "fake: embedding failed"

// MaxConcurrentEmbeds returns the largest number of /api/embed requests
// that were being served at the same time so far (see WithEmbedDelay).
func (s *Server) MaxConcurrentEmbeds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.embedMax
}

// statusWriter records the status a handler sends.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (cutConnection) reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) handleEmbed(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	idx := len(s.embeds)
	s.embeds = append(s.embeds, EmbedRecord{})
	s.embedActive++
	s.embedMax = max(s.embedMax, s.embedActive)
	failStatus := 0
	if s.failEmbeds > 0 {
		s.failEmbeds--
		failStatus = s.failStatus
	}
	down := s.downCh
	s.mu.Unlock()

	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		s.mu.Lock()
		s.embeds[idx].Status = sw.status
		s.embedActive--
		s.mu.Unlock()
	}()
	s.serveEmbed(sw, r, idx, failStatus, down)
}

func (s *Server) serveEmbed(w http.ResponseWriter, r *http.Request, idx, failStatus int, down <-chan struct{}) {
	start := time.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req api.EmbedRequest
	if failStatus != 0 {
		_ = json.Unmarshal(body, &req) // best effort, for the record
		s.noteEmbed(idx, req)
		writeError(w, failStatus, EmbedFailedText)
		return
	}
	if !decodeBody(w, body, &req) {
		return
	}
	s.noteEmbed(idx, req)
	var inputs []string
	switch in := req.Input.(type) {
	case string:
		if in != "" {
			inputs = append(inputs, in)
		}
	case []any:
		for _, v := range in {
			str, ok := v.(string)
			if !ok {
				writeError(w, http.StatusBadRequest, "invalid input type")
				return
			}
			inputs = append(inputs, str)
		}
	default:
		if req.Input != nil {
			writeError(w, http.StatusBadRequest, "invalid input type")
			return
		}
	}
	if req.Model == "" {
		writeError(w, http.StatusBadRequest, "model is required")
		return
	}
	m, ok := s.lookup(req.Model)
	if !ok {
		// Ollama v0.17.4 EmbedHandler goes through the scheduler: this wording.
		writeError(w, http.StatusNotFound, fmt.Sprintf("model %q not found, try pulling it first", req.Model))
		return
	}
	s.touch(m, req.KeepAlive, numCtxOf(req.Options))
	loaded := time.Since(start)
	if len(inputs) == 0 {
		writeJSON(w, http.StatusOK, api.EmbedResponse{Model: req.Model, Embeddings: [][]float32{}})
		return
	}
	if !m.has(CapEmbedding) {
		// What Ollama's runner answers for a model without pooling.
		writeError(w, http.StatusNotImplemented, "this model does not support embeddings")
		return
	}
	switch pause(r.Context(), down, s.closing, s.embedDelay) {
	case stopClient:
		return
	case stopDown, stopClosed:
		cutConnection(w)
		return
	}

	// Like Ollama's EmbedHandler: an input longer than the runner's context
	// (min(num_ctx or the default window, ContextLength)) is cut to fit,
	// unless "truncate": false, which fails the whole request with the
	// runner's 400.
	ctxLen := min(contextWindow(m, req.Options), m.ContextLength)
	truncate := req.Truncate == nil || *req.Truncate
	resp := api.EmbedResponse{Model: req.Model, Embeddings: make([][]float32, len(inputs))}
	for i, in := range inputs {
		n := embedTokens(m.CharsPerToken, in)
		if n > ctxLen {
			if !truncate {
				writeError(w, http.StatusBadRequest, ErrInputTooLong)
				return
			}
			in = firstRunes(in, int(float64(ctxLen)*m.CharsPerToken))
			n = ctxLen
		}
		v := Vector(in, m.EmbeddingLength)
		if req.Dimensions > 0 && req.Dimensions < len(v) {
			v = normalize(v[:req.Dimensions])
		}
		resp.Embeddings[i] = v
		resp.PromptEvalCount += n
	}
	resp.LoadDuration = max(loaded, time.Microsecond)
	resp.TotalDuration = max(time.Since(start), resp.LoadDuration+time.Microsecond)
	writeJSON(w, http.StatusOK, resp)
}

// noteEmbed fills the model and input count of record idx.
func (s *Server) noteEmbed(idx int, req api.EmbedRequest) {
	n := 0
	switch in := req.Input.(type) {
	case string:
		if in != "" {
			n = 1
		}
	case []any:
		n = len(in)
	}
	s.mu.Lock()
	s.embeds[idx].Model = req.Model
	s.embeds[idx].Inputs = n
	s.mu.Unlock()
}

// embedTokens is how many tokens the fake counts for an embedding input
// with a model of cpt characters per token: ceil(runes / cpt), at least 1.
// It is the input's share of prompt_eval_count in /api/embed (capped at
// the context when the input was truncated).
func embedTokens(cpt float64, s string) int {
	if cpt <= 0 {
		cpt = defaultCharsPerToken
	}
	return max(1, int(math.Ceil(float64(utf8.RuneCountInString(s))/cpt)))
}

// firstRunes returns the first n runes of s.
func firstRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// normalize scales v in place to unit length (Ollama's normalize).
func normalize(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	n := 1 / math.Max(math.Sqrt(sum), 1e-12)
	for i := range v {
		v[i] = float32(float64(v[i]) * n)
	}
	return v
}

func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req api.EmbeddingRequest
	if !decodeBody(w, body, &req) {
		return
	}
	if req.Model == "" {
		writeError(w, http.StatusBadRequest, "model is required")
		return
	}
	m, ok := s.lookup(req.Model)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("model %q not found, try pulling it first", req.Model))
		return
	}
	s.touch(m, req.KeepAlive, numCtxOf(req.Options))
	if req.Prompt == "" {
		writeJSON(w, http.StatusOK, api.EmbeddingResponse{Embedding: []float64{}})
		return
	}
	if !m.has(CapEmbedding) {
		writeError(w, http.StatusInternalServerError, "this model does not support embeddings")
		return
	}
	v := Vector(req.Prompt, m.EmbeddingLength) // the legacy endpoint does not normalise, but the fake's vectors are unit length anyway
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	writeJSON(w, http.StatusOK, api.EmbeddingResponse{Embedding: out})
}
