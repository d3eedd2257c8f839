package chat

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ollama/ollama/api"
)

// Catalog is the part of the Ollama client that lists models.
type Catalog interface {
	List(ctx context.Context) (*api.ListResponse, error)
	Show(ctx context.Context, req *api.ShowRequest) (*api.ShowResponse, error)
}

// Model is one model the Ollama server offers.
type Model struct {
	Name          string
	Capabilities  []string
	ContextLength int // from /api/show, 0 when unknown
	// From /api/tags: the size on disk, its digest, when it changed, and
	// its details.
	Size          int64
	Digest        string
	ModifiedAt    time.Time
	Family        string
	ParameterSize string // "8.0B"
	Quantization  string // "Q4_K_M"
}

// Has reports whether the model has a capability ("completion", "tools",
// "vision", "thinking", "embedding").
func (m Model) Has(c string) bool { return slices.Contains(m.Capabilities, c) }

// Models is the catalogue of the Ollama server, cached briefly so that page
// loads do not each ask Ollama.
type Models struct {
	client       Catalog
	host         string
	defaultModel string
	maxCtx       int
	ttl, errTTL  time.Duration

	stale atomic.Bool // Invalidate was called: the next List reads again

	mu     sync.Mutex
	models []Model
	err    error
	at     time.Time
	// shows caches /api/show by model and digest: a model is shown again
	// only when it changed (a new pull), not on every reading of the list.
	shows map[string]shown
}

// shown is what /api/show said of a model at a digest.
type shown struct {
	digest       string
	capabilities []string
	ctxLen       int
}

// NewModels returns a catalogue over client. defaultModel is
// WEFT_DEFAULT_MODEL; maxCtx caps the context window sent as num_ctx (a
// model's full window can need far more memory than the machine has).
func NewModels(client Catalog, host, defaultModel string, maxCtx int) *Models {
	if maxCtx <= 0 {
		maxCtx = 8192
	}
	return &Models{client: client, host: host, defaultModel: defaultModel, maxCtx: maxCtx,
		ttl: 30 * time.Second, errTTL: 5 * time.Second, shows: map[string]shown{}}
}

// Invalidate makes the next List read the server(s) again: a model was
// pulled or deleted. It never waits (the notes' listener calls it while a
// List may be reading the servers).
func (m *Models) Invalidate() { m.stale.Store(true) }

// List returns every model with its capabilities.
func (m *Models) List(ctx context.Context) ([]Model, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ttl := m.ttl
	if m.err != nil {
		ttl = m.errTTL
	}
	if !m.stale.Swap(false) && !m.at.IsZero() && time.Since(m.at) < ttl {
		return m.models, m.err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	m.models, m.err = m.fetch(ctx)
	m.at = time.Now()
	return m.models, m.err
}

func (m *Models) fetch(ctx context.Context) ([]Model, error) {
	list, err := m.client.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Model, 0, len(list.Models))
	for _, lm := range list.Models {
		md := Model{Name: lm.Name, Size: lm.Size, Digest: lm.Digest, ModifiedAt: lm.ModifiedAt,
			Family: lm.Details.Family, ParameterSize: lm.Details.ParameterSize, Quantization: lm.Details.QuantizationLevel}
		key := canonicalModel(lm.Name)
		if sh, ok := m.shows[key]; ok && sh.digest == lm.Digest && lm.Digest != "" {
			md.Capabilities, md.ContextLength = sh.capabilities, sh.ctxLen
		} else if show, err := m.client.Show(ctx, &api.ShowRequest{Model: lm.Name}); err == nil {
			for _, c := range show.Capabilities {
				md.Capabilities = append(md.Capabilities, string(c))
			}
			md.ContextLength = contextLength(show.ModelInfo)
			m.shows[key] = shown{digest: lm.Digest, capabilities: md.Capabilities, ctxLen: md.ContextLength}
		}
		out = append(out, md)
	}
	slices.SortFunc(out, func(a, b Model) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// contextLength reads "<architecture>.context_length" from /api/show.
func contextLength(info map[string]any) int {
	arch, _ := info["general.architecture"].(string)
	for k, v := range info {
		if k == arch+".context_length" || (arch == "" && strings.HasSuffix(k, ".context_length")) {
			if f, ok := v.(float64); ok {
				return int(f)
			}
		}
	}
	return 0
}

// ChatModels lists the names of models that can chat, for the composer.
func (m *Models) ChatModels(ctx context.Context) []string { return m.withCapability(ctx, "completion") }

// withCapability lists the names of the models that have a capability.
func (m *Models) withCapability(ctx context.Context, c string) []string {
	all, _ := m.List(ctx)
	var out []string
	for _, md := range all {
		if md.Has(c) {
			out = append(out, md.Name)
		}
	}
	return out
}

// Default is the model a new thread starts with: WEFT_DEFAULT_MODEL (as the
// server names it), else the first chat-capable model.
func (m *Models) Default(ctx context.Context) string {
	if m.defaultModel != "" {
		if md, ok := m.find(ctx, m.defaultModel); ok {
			return md.Name
		}
		return m.defaultModel
	}
	if names := m.ChatModels(ctx); len(names) > 0 {
		return names[0]
	}
	return ""
}

// NumCtx is the context window to request for a model: its own length,
// capped by the configured maximum.
func (m *Models) NumCtx(ctx context.Context, name string) int {
	if md, ok := m.find(ctx, name); ok && md.ContextLength > 0 {
		return min(md.ContextLength, m.maxCtx)
	}
	return m.maxCtx
}

// find looks a model up the way Ollama does: case-insensitively, with
// ":latest" when the name has no tag.
func (m *Models) find(ctx context.Context, name string) (Model, bool) {
	all, _ := m.List(ctx)
	want := canonicalModel(name)
	for _, md := range all {
		if canonicalModel(md.Name) == want {
			return md, true
		}
	}
	return Model{}, false
}

func canonicalModel(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	if i := strings.LastIndex(name, "/"); !strings.Contains(name[i+1:], ":") {
		name += ":latest"
	}
	return name
}

// placement is a catalogue over several model servers (Servers): where
// each model is, and how every server is.
type placement interface {
	Where(model string) []string
	Status() []ServerStatus
}

// Where names the answering servers that have a model when there are
// several (nil with one server: it is everywhere).
func (m *Models) Where(name string) []string {
	if p, ok := m.client.(placement); ok {
		return p.Where(name)
	}
	return nil
}

// Servers describes every model server when there are several (nil with
// one).
func (m *Models) Servers() []ServerStatus {
	if p, ok := m.client.(placement); ok {
		return p.Status()
	}
	return nil
}

// Problem describes what is wrong with the model server for a banner, or
// returns "" when it answers.
func (m *Models) Problem(ctx context.Context) string {
	all, err := m.List(ctx)
	switch {
	case err != nil:
		return fmt.Sprintf("Ollama is not reachable at %s. Start it with `ollama serve`, or set OLLAMA_HOST to where it runs. Your threads are safe; answers resume once it is back.", m.host)
	case len(all) == 0:
		return fmt.Sprintf("The Ollama server at %s has no models yet. An administrator can pull one on the Models page (/admin/models), for example llama3.2.", m.host)
	}
	return ""
}

// ContextLength is a model's context length from /api/show (0: unknown).
func (m *Models) ContextLength(ctx context.Context, name string) int {
	if md, ok := m.find(ctx, name); ok {
		return md.ContextLength
	}
	return 0
}

// EmbedModels lists the names of models that make embeddings, for knowledge
// bases.
func (m *Models) EmbedModels(ctx context.Context) []string { return m.withCapability(ctx, "embedding") }

// Supports reports whether a model has a capability; known is false when
// the model is not on the server (or the server is unreachable).
func (m *Models) Supports(ctx context.Context, name, capability string) (has, known bool) {
	md, ok := m.find(ctx, name)
	if !ok {
		return false, false
	}
	return md.Has(capability), true
}
