package rag

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/ollama/ollama/api"
	"github.com/riverqueue/river"

	"weft/db"
	"weft/internal/usererr"
	"weft/internal/webfetch"
)

// Embedder is the part of the Ollama client that embeds.
type Embedder interface {
	Embed(ctx context.Context, req *api.EmbedRequest) (*api.EmbedResponse, error)
}

// Config tunes ingestion and retrieval.
type Config struct {
	OllamaHost   string // shown in error messages
	MaxFileBytes int64  // one uploaded file (default 50 MB)
	// Workers is how many ingestion or re-embedding jobs one instance runs
	// at once (default 2): the size of Queue, which the application gives
	// the job queue. EmbedConcurrency is how many embedding requests those
	// jobs send at once (default 2: Ollama's queue is finite).
	Workers          int
	EmbedConcurrency int
	EmbedBatch       int // texts per embedding request (default 32)
	// RetryBackoff is the first wait after a transient embedding error
	// (default 1 s; doubled per try, 4 tries per batch).
	RetryBackoff time.Duration
	// RewriteTimeout bounds the model's query rewriting (default 10 s):
	// past it the question is searched alone.
	RewriteTimeout time.Duration
	Web            webfetch.Client // fetches pages added from the web (zero: the public internet, 1 min a page)
	// WebOff (WEFT_KB_WEB=off) turns knowledge from the web off: no page
	// is added, fetched or fetched again; jobs queued before settle with
	// ErrWebOff's message, without a request.
	WebOff bool
	// Search is the search service used until an administrator saves one
	// on /admin (WEFT_SEARCH_URL, WEFT_SEARCH_KIND); SearchTimeout bounds
	// one request to it (default 10 s).
	Search        WebSearchSettings
	SearchTimeout time.Duration
}

// Queue is the job queue ingestion and re-embedding run in: River's
// default one, where the jobs queued by every earlier version wait.
const Queue = river.QueueDefault

// Jobs is the job queue (internal/jobs) as ingestion uses it: its workers
// are added when the service is built, and each job is inserted in the
// transaction of the row it works on.
type Jobs interface {
	Register(add func(*river.Workers) error, periodic ...*river.PeriodicJob) error
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) error
}

// Service ingests documents in the background (jobs on the shared queue)
// and retrieves from knowledge bases.
type Service struct {
	store *db.DB
	emb   Embedder
	llm   Chatter // rewrites questions into search queries
	cfg   Config
	jobs  Jobs
	sem   chan struct{} // bounds background embedding requests
	web   webCache      // the search service's settings (websearch.go)
	// pageSlots bounds the pages web searches fetch at once, across
	// every user (websearch_read.go).
	pageSlots chan struct{}
}

// New returns a service whose workers are registered on jobs; they run
// once the queue starts.
func New(store *db.DB, emb Ollama, jobs Jobs, cfg Config) (*Service, error) {
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = 50 << 20
	}
	if cfg.EmbedConcurrency <= 0 {
		cfg.EmbedConcurrency = 2
	}
	if cfg.EmbedBatch <= 0 {
		cfg.EmbedBatch = 32
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = time.Second
	}
	if cfg.RewriteTimeout <= 0 {
		cfg.RewriteTimeout = 10 * time.Second
	}
	s := &Service{store: store, emb: emb, llm: emb, cfg: cfg, jobs: jobs, sem: make(chan struct{}, cfg.EmbedConcurrency),
		pageSlots: make(chan struct{}, webPagesAllAtOnce)}
	err := jobs.Register(func(w *river.Workers) error {
		if err := river.AddWorkerSafely(w, &ingestWorker{s: s}); err != nil {
			return err
		}
		if err := river.AddWorkerSafely(w, &reembedWorker{s: s}); err != nil {
			return err
		}
		if err := river.AddWorkerSafely(w, &languageWorker{s: s}); err != nil {
			return err
		}
		return s.addWebWorkers(w)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// MaxFileBytes is the size limit of one uploaded file.
func (s *Service) MaxFileBytes() int64 { return s.cfg.MaxFileBytes }

// WebOn reports whether pages may be added from the web (Config.WebOff).
func (s *Service) WebOn() bool { return !s.cfg.WebOff }

// Dimensions embeds a probe text with model and returns its vector length:
// it checks that the model can embed and learns its dimension.
func (s *Service) Dimensions(ctx context.Context, model string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	vs, err := s.embed(ctx, model, []string{"dimension probe"})
	if err != nil {
		return 0, err
	}
	if len(vs) != 1 || len(vs[0]) == 0 {
		return 0, errors.New("the model returned no embedding")
	}
	return len(vs[0]), nil
}

// embed asks Ollama for embeddings of texts (one request).
func (s *Service) embed(ctx context.Context, model string, texts []string) ([][]float32, error) {
	resp, err := s.emb.Embed(ctx, &api.EmbedRequest{Model: model, Input: texts, Truncate: ptr(true)})
	if err != nil {
		return nil, err
	}
	if len(resp.Embeddings) != len(texts) {
		return nil, fmt.Errorf("the model returned %d embeddings for %d texts", len(resp.Embeddings), len(texts))
	}
	return resp.Embeddings, nil
}

// embedBackground embeds for a job: bounded concurrency, and transient
// failures (the server busy, restarting or unreachable) retried with
// backoff.
func (s *Service) embedBackground(ctx context.Context, model string, texts []string) ([][]float32, error) {
	wait := s.cfg.RetryBackoff
	var err error
	for try := 0; try < 4; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
			wait *= 2
		}
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		var vs [][]float32
		vs, err = s.embed(ctx, model, texts)
		<-s.sem
		if err == nil || !transient(err) {
			return vs, err
		}
	}
	return nil, err
}

// transient reports whether an embedding error may go away by itself.
func transient(err error) bool {
	var se api.StatusError
	if errors.As(err, &se) {
		return se.StatusCode >= 500 || se.StatusCode == 429
	}
	return !errors.Is(err, context.Canceled)
}

// describeEmbedError says what went wrong with the embedding model, for the
// user.
func (s *Service) describeEmbedError(err error, model string) string {
	var se api.StatusError
	switch {
	case errors.As(err, &se) && se.StatusCode == 404:
		return fmt.Sprintf("The embedding model %q is not available on the Ollama server at %s. An administrator can pull it on the Models page (/admin/models, or `ollama pull %s` on the server), or choose another model.", model, s.cfg.OllamaHost, model)
	case errors.As(err, &se) && se.StatusCode == 501:
		return fmt.Sprintf("The model %q cannot make embeddings. Choose an embedding model (for example nomic-embed-text).", model)
	case errors.As(err, &se):
		// Ollama's words, quoted as untrusted text: cleaned and short.
		return "The embedding model failed: " + usererr.Untrusted(se.ErrorMessage, 300)
	default:
		host := s.cfg.OllamaHost
		// With several model servers, the ones that have the model
		// (chat.UnreachableError).
		var at interface{ Where() string }
		if errors.As(err, &at) && at.Where() != "" {
			host = at.Where()
		}
		return fmt.Sprintf("Ollama is not reachable at %s (or stopped answering). Ingestion will retry; start it with `ollama serve`.", host)
	}
}

// EnqueueIngest returns the enqueue step of db.AddDocument: the ingestion
// job is inserted in the same transaction as its document.
func (s *Service) EnqueueIngest(ctx context.Context) func(tx pgx.Tx, doc db.Document) error {
	return func(tx pgx.Tx, doc db.Document) error {
		return s.jobs.InsertTx(ctx, tx, IngestArgs{DocumentID: doc.ID}, &river.InsertOpts{MaxAttempts: ingestAttempts})
	}
}

// EnqueueReembed returns the enqueue step of db.StartReembed.
func (s *Service) EnqueueReembed(ctx context.Context) func(tx pgx.Tx, kb db.KnowledgeBase) error {
	return func(tx pgx.Tx, kb db.KnowledgeBase) error {
		return s.jobs.InsertTx(ctx, tx, ReembedArgs{KBID: kb.ID}, &river.InsertOpts{MaxAttempts: ingestAttempts})
	}
}

func ptr[T any](v T) *T { return &v }
