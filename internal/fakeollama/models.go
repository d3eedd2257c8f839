package fakeollama

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/types/model"
)

// The fake's models: their capabilities, names as Ollama spells them,
// token counts, and /api/tags, /api/ps and /api/show.

// Capability names, as Ollama reports them in /api/show.
const (
	CapCompletion = "completion"
	CapThinking   = "thinking"
	CapTools      = "tools"
	CapVision     = "vision"
	CapEmbedding  = "embedding"
)

// Model is a model the fake offers in /api/tags and /api/show and accepts
// in /api/chat and /api/embed.
//
// Name is matched like Ollama does: case-insensitively and with ":latest"
// implied when no tag is given, so "tiny", "tiny:latest" and "TINY" are the
// same model. /api/tags lists the name with its tag ("tiny:latest"), as
// Ollama does.
type Model struct {
	Name         string
	Capabilities []string // default: ["completion"]
	// ContextLength is reported as "<family>.context_length" in /api/show
	// model_info (default 4096).
	ContextLength int
	// EmbeddingLength is the length of /api/embed vectors and is reported as
	// "<family>.embedding_length" when > 0 (default 256 for models with the
	// "embedding" capability, else 0). See Vector.
	EmbeddingLength int
	Family          string // default "llama"
	// CharsPerToken is how many characters (runes) of message content make
	// one token for this model (default 4 when <= 0). See TokensOf.
	CharsPerToken float64
}

// MessageOverhead is how many tokens the fake's chat template adds to each
// message (role markers and the like), on top of its content. See TokensOf.
const MessageOverhead = 4

// defaultCharsPerToken is Model.CharsPerToken when not set.
const defaultCharsPerToken = 4

// TokensOf is the number of prompt tokens the fake counts for msgs with a
// model of cpt characters per token (default 4 when cpt <= 0): the sum over
// the messages of MessageOverhead + ceil(runes(content) / cpt). Only the
// content counts; thinking, tool calls and images are free. It is what the
// fake uses for truncation and for the default prompt_eval_count, so tests
// can compute what it will report.
func TokensOf(cpt float64, msgs []api.Message) int {
	if cpt <= 0 {
		cpt = defaultCharsPerToken
	}
	n := 0
	for _, m := range msgs {
		n += MessageOverhead + int(math.Ceil(float64(utf8.RuneCountInString(m.Content))/cpt))
	}
	return n
}

// PromptTokens is TokensOf for the model named model (matched like in
// /api/chat; an unknown model counts with the default 4 characters per
// token).
func (s *Server) PromptTokens(model string, msgs []api.Message) int {
	m, _ := s.lookup(model)
	return TokensOf(m.CharsPerToken, msgs)
}

// DefaultModels is the model set used when no WithModels option is given.
func DefaultModels() []Model {
	return []Model{
		{Name: "tiny", Capabilities: []string{CapCompletion}, ContextLength: 4096, Family: "llama"},
		{Name: "thinker", Capabilities: []string{CapCompletion, CapThinking}, ContextLength: 4096, Family: "llama"},
		{Name: "toolie", Capabilities: []string{CapCompletion, CapTools}, ContextLength: 4096, Family: "llama"},
		{Name: "vision", Capabilities: []string{CapCompletion, CapVision}, ContextLength: 4096, Family: "llama"},
		{Name: "embedder", Capabilities: []string{CapEmbedding}, ContextLength: 2048, EmbeddingLength: 256, Family: "bert"},
		{Name: "embedder-small", Capabilities: []string{CapEmbedding}, ContextLength: 512, EmbeddingLength: 64, Family: "bert"},
	}
}

func (m Model) has(c string) bool { return slices.Contains(m.Capabilities, c) }

type loadedModel struct {
	m       Model
	expires time.Time
	ctxLen  int
}

// canonical is the lookup key of a model name: lower case, ":latest" when
// no tag.
func canonical(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	if n == "" {
		return ""
	}
	slash := strings.LastIndex(n, "/")
	if !strings.Contains(n[slash+1:], ":") {
		n += ":latest"
	}
	return n
}

// displayName is how /api/tags shows a model: with its tag.
func displayName(name string) string {
	slash := strings.LastIndex(name, "/")
	if !strings.Contains(name[slash+1:], ":") {
		return name + ":latest"
	}
	return name
}

// qualified is the fully qualified name Ollama puts in some errors.
func qualified(name string) string {
	n := displayName(name)
	switch strings.Count(n, "/") {
	case 0:
		return "registry.ollama.ai/library/" + n
	case 1:
		return "registry.ollama.ai/" + n
	}
	return n
}

func (s *Server) lookup(name string) (Model, bool) {
	c := canonical(name)
	for _, m := range s.catalogue() {
		if canonical(m.Name) == c {
			return m, true
		}
	}
	return Model{}, false
}

// modifiedAt gives models fixed, distinct modification times, the first
// model being the most recent (Ollama lists the most recent first).
func modifiedAt(i int) time.Time {
	return time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC).Add(-time.Duration(i) * time.Hour)
}

func digest(name string) string {
	h := sha256.Sum256([]byte("fakeollama:" + canonical(name)))
	return hex.EncodeToString(h[:])
}

func size(name string) int64 {
	h := sha256.Sum256([]byte(canonical(name)))
	return 1_000_000 + int64(binary.BigEndian.Uint32(h[:4])%1_000_000)
}

func details(m Model) api.ModelDetails {
	return api.ModelDetails{
		Format:            "gguf",
		Family:            m.Family,
		Families:          []string{m.Family},
		ParameterSize:     "1M",
		QuantizationLevel: "Q4_0",
	}
}

func (s *Server) touch(m Model, ka *api.Duration, numCtx int) {
	exp := time.Now().Add(5 * time.Minute)
	if ka != nil {
		switch {
		case ka.Duration < 0:
			exp = time.Now().Add(math.MaxInt64 / 2)
		default:
			exp = time.Now().Add(ka.Duration)
		}
	}
	ctxLen := min(m.ContextLength, 4096)
	if numCtx > 0 {
		ctxLen = numCtx
	}
	s.mu.Lock()
	s.loaded[canonical(m.Name)] = loadedModel{m: m, expires: exp, ctxLen: ctxLen}
	s.mu.Unlock()
}

func (s *Server) unload(m Model) {
	s.mu.Lock()
	delete(s.loaded, canonical(m.Name))
	s.mu.Unlock()
}

func (s *Server) handleTags(w http.ResponseWriter, r *http.Request) {
	resp := api.ListResponse{Models: []api.ListModelResponse{}}
	for i, m := range s.catalogue() {
		n := displayName(m.Name)
		resp.Models = append(resp.Models, api.ListModelResponse{
			Name:       n,
			Model:      n,
			ModifiedAt: modifiedAt(i),
			Size:       size(m.Name),
			Digest:     digest(m.Name),
			Details:    details(m),
		})
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handlePs(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	resp := api.ProcessResponse{Models: []api.ProcessModelResponse{}}
	s.mu.Lock()
	for k, l := range s.loaded {
		if !l.expires.After(now) {
			delete(s.loaded, k)
			continue
		}
		n := displayName(l.m.Name)
		resp.Models = append(resp.Models, api.ProcessModelResponse{
			Name:          n,
			Model:         n,
			Size:          size(l.m.Name),
			SizeVRAM:      size(l.m.Name), // all of it on the GPU
			Digest:        digest(l.m.Name),
			Details:       details(l.m),
			ExpiresAt:     l.expires,
			ContextLength: l.ctxLen,
		})
	}
	s.mu.Unlock()
	slices.SortStableFunc(resp.Models, func(a, b api.ProcessModelResponse) int {
		if c := b.ExpiresAt.Compare(a.ExpiresAt); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handleShow(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req api.ShowRequest
	if !decodeBody(w, body, &req) {
		return
	}
	if req.Model == "" {
		req.Model = req.Name
	}
	if req.Model == "" {
		writeError(w, http.StatusBadRequest, "model is required")
		return
	}
	m, ok := s.lookup(req.Model)
	if !ok {
		// Ollama v0.17.4 ShowHandler wording.
		writeError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", req.Model))
		return
	}
	idx := slices.IndexFunc(s.catalogue(), func(x Model) bool { return canonical(x.Name) == canonical(m.Name) })
	info := map[string]any{
		"general.architecture":             m.Family,
		"general.parameter_count":          1_000_000,
		"general.file_type":                2,
		m.Family + ".context_length":       m.ContextLength,
		m.Family + ".block_count":          4,
		"general.quantization_version":     2,
		"tokenizer.ggml.model":             "llama",
		m.Family + ".attention.head_count": 4,
		"general.basename":                 strings.SplitN(displayName(m.Name), ":", 2)[0],
	}
	if m.EmbeddingLength > 0 {
		info[m.Family+".embedding_length"] = m.EmbeddingLength
	}
	if m.has(CapEmbedding) {
		info[m.Family+".pooling_type"] = 1
	}
	if m.has(CapVision) {
		info[m.Family+".vision.block_count"] = 2
	}
	caps := make([]model.Capability, 0, len(m.Capabilities))
	for _, c := range m.Capabilities {
		caps = append(caps, model.Capability(c))
	}
	short := displayName(m.Name)
	resp := api.ShowResponse{
		Modelfile: "# Modelfile generated by \"ollama show\"\n" +
			"# To build a new Modelfile based on this, replace FROM with:\n" +
			"# FROM " + short + "\n\n" +
			"FROM /fake/blobs/sha256-" + digest(m.Name) + "\n" +
			"TEMPLATE {{ .Prompt }}\n",
		Parameters:   fmt.Sprintf("%-30s %d", "num_ctx", min(m.ContextLength, 4096)),
		Template:     "{{ .Prompt }}",
		Details:      details(m),
		ModelInfo:    info,
		Capabilities: caps,
		ModifiedAt:   modifiedAt(idx),
	}
	writeJSON(w, http.StatusOK, resp)
}

func numCtxOf(opts map[string]any) int {
	switch v := opts["num_ctx"].(type) {
	case float64:
		return int(v)
	case int:
		return v
	case json.Number:
		n, _ := v.Int64()
		return int(n)
	}
	return 0
}
