package fakeollama

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ollama/ollama/api"
)

// ---- the lexical embedder ----

// defaultEmbeddingLength is Model.EmbeddingLength for embedding models that
// do not set it.
const defaultEmbeddingLength = 256

// Feature weights of Vector.
const (
	wordWeight    = 1.0
	trigramWeight = 0.3
)

// Vector returns the deterministic unit-length embedding the fake gives for
// input with a model of embedding length dim (an empty slice when dim <= 0).
//
// It is a lexical embedder that behaves like a weak real embedding model:
// texts sharing words (up to crude stemming) or word fragments get close
// vectors, unrelated texts get nearly orthogonal ones. The input is
// lowercased and split into words (runs of Unicode letters and digits; runs
// of CJK characters give their character bigrams); English stopwords are
// dropped and common suffixes stripped ("running", "runs" and "run" give
// the same word). Each word (weight 1) and each character trigram of the
// word padded with "<" and ">" (weight 0.3) is hashed (FNV-1a, mixed) to a
// bucket in [0, dim) and a sign; the vector is the sum, L2-normalized.
// Input without any word (empty, punctuation, only stopwords) gives a fixed
// unit vector, all components 1/sqrt(dim).
func Vector(input string, dim int) []float32 {
	if dim <= 0 {
		return []float32{}
	}
	acc := make([]float64, dim)
	add := func(kind byte, feature string, w float64) {
		h := featureHash(kind, feature)
		b := int(h % uint64(dim))
		if h>>63 != 0 {
			w = -w
		}
		acc[b] += w
	}
	var grams []string
	for _, word := range words(input) {
		add('w', word.text, wordWeight)
		if word.cjk {
			continue
		}
		grams = trigrams(grams[:0], word.text)
		for _, g := range grams {
			add('g', g, trigramWeight)
		}
	}
	var sum float64
	for _, x := range acc {
		sum += x * x
	}
	v := make([]float32, dim)
	if sum < 1e-12 {
		// No feature (or features that cancelled out exactly).
		x := float32(1 / math.Sqrt(float64(dim)))
		for i := range v {
			v[i] = x
		}
		return v
	}
	n := 1 / math.Sqrt(sum)
	for i, x := range acc {
		v[i] = float32(x * n)
	}
	return v
}

// featureHash is 64-bit FNV-1a of kind, a separator and feature, followed
// by a splitmix64 finalizer so that both the low bits (bucket) and the top
// bit (sign) are well mixed.
func featureHash(kind byte, feature string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	h = (h ^ uint64(kind)) * prime
	h = (h ^ 0) * prime
	for i := 0; i < len(feature); i++ {
		h = (h ^ uint64(feature[i])) * prime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// trigrams appends the character trigrams of "<" + w + ">" to dst.
func trigrams(dst []string, w string) []string {
	p := "<" + w + ">"
	// Byte offsets of the runes of p, plus len(p).
	var offs [64]int
	idx := offs[:0]
	for i := range p {
		idx = append(idx, i)
	}
	idx = append(idx, len(p))
	for i := 0; i+3 < len(idx); i++ {
		dst = append(dst, p[idx[i]:idx[i+3]])
	}
	return dst
}

type word struct {
	text string
	cjk  bool // a CJK character bigram (or lone character)
}

// words splits s into the embedder's words: lowercased, stopwords dropped,
// stemmed; CJK runs become character bigrams.
func words(s string) []word {
	var out []word
	var cur strings.Builder
	var cjk []rune
	flushWord := func() {
		if cur.Len() == 0 {
			return
		}
		w := cur.String()
		cur.Reset()
		if stopwords[w] {
			return
		}
		out = append(out, word{text: stem(w)})
	}
	flushCJK := func() {
		switch len(cjk) {
		case 0:
			return
		case 1:
			out = append(out, word{text: string(cjk), cjk: true})
		default:
			for i := 0; i+1 < len(cjk); i++ {
				out = append(out, word{text: string(cjk[i : i+2]), cjk: true})
			}
		}
		cjk = cjk[:0]
	}
	for _, r := range s {
		r = unicode.ToLower(r)
		switch {
		case isCJK(r):
			flushWord()
			cjk = append(cjk, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r) || (unicode.Is(unicode.Mn, r) && cur.Len() > 0):
			flushCJK()
			cur.WriteRune(r)
		default:
			flushWord()
			flushCJK()
		}
	}
	flushWord()
	flushCJK()
	return out
}

func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// stopwords is a small English stopword list (lowercase). Single letters
// left by apostrophes ("don't", "it's") are included.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		a an the and or but if then else nor so than too very
		of to in on at by for with from into onto about as per via
		is are was were be been being am do does did done doing
		have has had having it its itself this that these those there here
		what which who whom whose when where why how
		i me my mine we us our ours you your yours he him his she her hers
		they them their theirs one ones
		not no yes can will would should could may might must shall
		just also all any some each every more most other such only own same
		up down out over under again once between during before after
		above below off until while because both few
		s t d ll m re ve
	`) {
		m[w] = true
	}
	return m
}()

// stem strips common English suffixes from an ASCII word, crudely: enough
// for "running", "runs" and "run", or "baked", "bakes", "baking" and
// "bake", to give the same word. Words of 3 bytes or less, and words with
// digits or non-ASCII letters, are kept as they are.
func stem(w string) string {
	if len(w) <= 3 {
		return w
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return w
		}
	}
	for _, suf := range suffixes {
		base, ok := strings.CutSuffix(w, suf.s)
		if !ok || len(base) < 3 {
			continue
		}
		if suf.s == "s" && strings.ContainsAny(base[len(base)-1:], "siu") {
			// "class", "basis", "bus", "status": not plurals.
			break
		}
		w = base + suf.r
		break
	}
	n := len(w)
	if n > 3 && w[n-1] == w[n-2] && !isVowel(w[n-1]) {
		w = w[:n-1] // runn -> run, stopp -> stop
	}
	n = len(w)
	if n > 3 && w[n-1] == 'e' {
		w = w[:n-1] // bake -> bak, like baking -> bak
	}
	n = len(w)
	if n > 3 && w[n-1] == 'y' {
		w = w[:n-1] + "i" // berry -> berri, like berries -> berri
	}
	return w
}

func isVowel(c byte) bool { return strings.IndexByte("aeiouy", c) >= 0 }

// suffixes are tried in order; the first that leaves a stem of 3 bytes or
// more is stripped and replaced.
var suffixes = []struct{ s, r string }{
	{"ingly", ""},
	{"edly", ""},
	{"ings", ""},
	{"ing", ""},
	{"ies", "y"},
	{"ied", "y"},
	{"ed", ""},
	{"es", ""},
	{"ly", ""},
	{"s", ""},
}

// ---- /api/embed and /api/embeddings ----

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
