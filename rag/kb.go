package rag

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/extract"
	"weft/internal/usererr"
)

// The rules of a knowledge base's life: what a name, a model, a setting
// and an uploaded file must be. Every refusal is a usererr error whose
// message is shown as is; any other error is the server's.

var errKBName = usererr.New("A knowledge base needs a name of 1 to 100 characters.")

// kbName is a name with its runs of spaces made one, or errKBName.
func kbName(name string) (string, error) {
	name = strings.Join(strings.Fields(name), " ")
	if name == "" || utf8.RuneCountInString(name) > 100 {
		return name, errKBName
	}
	return name, nil
}

// CreateKB adds a knowledge base named name (spaces made single) that
// embeds with model, to one of the user's workspaces: the model must be
// reachable, make embeddings and fit the index. It returns the name as
// cleaned, to show again with a refusal.
func (s *Service) CreateKB(ctx context.Context, user, workspace int64, name, model string) (db.KnowledgeBase, string, error) {
	name, err := kbName(name)
	if err != nil {
		return db.KnowledgeBase{}, name, err
	}
	model = strings.TrimSpace(model)
	if model == "" || len(model) > 200 {
		return db.KnowledgeBase{}, name, usererr.New("Choose an embedding model (an administrator can pull one, such as nomic-embed-text, on the Models page).")
	}
	dims, err := s.Dimensions(ctx, model)
	if err != nil {
		return db.KnowledgeBase{}, name, usererr.Wrap(err, fmt.Sprintf("The embedding model %q could not be used: %s", model, embedProblem(ctx, err)))
	}
	if dims > db.MaxDims {
		return db.KnowledgeBase{}, name, usererr.New(fmt.Sprintf("The embedding model %q makes vectors of %d dimensions; Weft's index takes at most %d. Choose another model.", model, dims, db.MaxDims))
	}
	kb, err := s.store.CreateKB(ctx, user, workspace, db.KBInput{Name: name, EmbedModel: model, Dims: dims})
	if errors.Is(err, db.ErrConflict) {
		return kb, name, usererr.Wrap(err, fmt.Sprintf("This workspace already has a knowledge base named %q.", name))
	}
	return kb, name, err
}

// RenameKB renames one of the user's knowledge bases.
func (s *Service) RenameKB(ctx context.Context, user, kb int64, name string) error {
	name, err := kbName(name)
	if err != nil {
		return err
	}
	err = s.store.RenameKB(ctx, user, kb, name)
	if errors.Is(err, db.ErrConflict) {
		return usererr.Wrap(err, "This workspace already has a knowledge base with that name.")
	}
	return err
}

// embedProblem is the user's part of an embedding error, told by its type:
// the Ollama client's api.StatusError (404: no such model, 501: it cannot
// embed), a transport error (*url.Error, net.Error: Ollama is not
// reachable); anything else is logged.
func embedProblem(ctx context.Context, err error) string {
	var se api.StatusError
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.As(err, &se) && se.StatusCode == http.StatusNotFound:
		return "it is not on the Ollama server (an administrator can pull it on the Models page first)."
	case errors.As(err, &se) && se.StatusCode == http.StatusNotImplemented:
		return "it cannot make embeddings; choose an embedding model."
	case errors.As(err, &se):
		return "Ollama refused it."
	case errors.As(err, &ue), errors.As(err, &ne):
		return "Ollama is not reachable."
	}
	slog.WarnContext(ctx, "embedding probe failed", "err", err)
	return "Ollama refused it."
}

// Settings are a knowledge base's retrieval settings as a form sent them:
// text, empty for "keep the current value".
type Settings struct {
	ChunkSize, ChunkOverlap, TopK, MinSimilarity string
	Language                                     string // "": keep
	RewriteQueries                               *bool  // nil: keep
}

// UpdateSettings checks every setting against its bounds and saves them
// all, or refuses with every problem named.
func (s *Service) UpdateSettings(ctx context.Context, user int64, kb db.KnowledgeBase, in Settings) error {
	out := db.KBInput{ChunkSize: kb.ChunkSize, ChunkOverlap: kb.ChunkOverlap, TopK: kb.TopK, MinSimilarity: kb.MinSimilarity,
		RewriteQueries: kb.RewriteQueries}
	if in.RewriteQueries != nil {
		out.RewriteQueries = *in.RewriteQueries
	}
	var errs []string
	num := func(field, text string, lo, hi int, dst *int) {
		if v := strings.TrimSpace(text); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < lo || n > hi {
				errs = append(errs, fmt.Sprintf("%s must be a whole number from %d to %d", field, lo, hi))
				return
			}
			*dst = n
		}
	}
	num("chunk_size", in.ChunkSize, 200, 20000, &out.ChunkSize)
	num("chunk_overlap", in.ChunkOverlap, 0, 5000, &out.ChunkOverlap)
	num("top_k", in.TopK, 1, 50, &out.TopK)
	if v := strings.TrimSpace(in.MinSimilarity); v != "" {
		f, err := strconv.ParseFloat(strings.ReplaceAll(v, ",", "."), 64)
		if err != nil || f < -1 || f > 1 {
			errs = append(errs, "min_similarity must be a number from -1 to 1")
		} else {
			out.MinSimilarity = f
		}
	}
	if out.ChunkOverlap >= out.ChunkSize {
		errs = append(errs, "the overlap must be smaller than the chunk size")
	}
	lang := strings.ToLower(strings.TrimSpace(in.Language))
	if lang != "" && !slices.Contains(db.Languages, lang) {
		errs = append(errs, fmt.Sprintf("the language must be one of %s", strings.Join(db.Languages, ", ")))
	}
	if len(errs) > 0 {
		return usererr.New("Not saved: " + strings.Join(errs, "; ") + ".")
	}
	if err := s.store.UpdateKBSettings(ctx, user, kb.ID, out); err != nil {
		return err
	}
	return s.setLanguage(ctx, user, kb, lang)
}

// ChangeModel moves a knowledge base to another embedding model: every
// chunk is embedded again in the background, and answers keep using the
// old vectors until the new ones are complete. It reports false, and does
// nothing, when model is the one in use.
func (s *Service) ChangeModel(ctx context.Context, user int64, kb db.KnowledgeBase, model string) (bool, error) {
	model = strings.TrimSpace(model)
	switch {
	case model == "" || len(model) > 200:
		return false, usererr.New("Choose an embedding model.")
	case kb.PendingModel != "":
		return false, usererr.New("This knowledge base is already moving to " + kb.PendingModel + "; wait until it is done.")
	case strings.EqualFold(model, kb.EmbedModel):
		return false, nil
	}
	dims, err := s.Dimensions(ctx, model)
	if err != nil {
		return false, usererr.Wrap(err, fmt.Sprintf("The embedding model %q could not be used: %s", model, embedProblem(ctx, err)))
	}
	if dims > db.MaxDims {
		return false, usererr.New(fmt.Sprintf("The embedding model %q makes vectors of %d dimensions; Weft's index takes at most %d.", model, dims, db.MaxDims))
	}
	err = s.store.StartReembed(ctx, user, kb.ID, model, dims, s.EnqueueReembed(ctx))
	if errors.Is(err, db.ErrConflict) {
		return false, usererr.Wrap(err, "This knowledge base is already moving to another model; wait until it is done.")
	}
	return err == nil, err
}

// AddFile stores one uploaded file as a document of kb and queues its
// ingestion, in one transaction. The file is refused — a usererr error
// whose message leads with its cleaned name — when it cannot be read
// whole, is over MaxFileBytes, empty, of a format extract cannot read,
// over the user's storage limit of maxUserBytes (0: none), or already in
// the knowledge base.
func (s *Service) AddFile(ctx context.Context, user int64, kb db.KnowledgeBase, name string, r io.Reader, maxUserBytes int64) error {
	name = extract.CleanFileName(name, "unnamed")
	refuse := func(cause error, why string) error { return usererr.Wrap(cause, name+": "+why) }
	max := s.cfg.MaxFileBytes
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	switch {
	case err != nil:
		return refuse(err, "the upload was cut off")
	case int64(len(data)) > max:
		return refuse(nil, fmt.Sprintf("larger than the limit of %s a file", usererr.Size(max)))
	case len(data) == 0:
		return refuse(nil, "the file is empty")
	}
	if _, err := extract.Detect(name, data); err != nil {
		return refuse(err, usererr.Or(err, extract.ErrUnsupported.Error()))
	}
	sum := sha256.Sum256(data)
	doc, err := s.store.AddDocument(ctx, user, kb.ID, db.NewDocument{Name: name, SHA256: hex.EncodeToString(sum[:]), Data: data,
		MaxUserBytes: maxUserBytes}, s.EnqueueIngest(ctx))
	switch {
	case errors.Is(err, db.ErrStorageLimit):
		return refuse(err, db.StorageLimitMessage(maxUserBytes))
	case errors.Is(err, db.ErrDuplicate):
		return refuse(err, fmt.Sprintf("the same content is already in this knowledge base (as %s)", doc.Name))
	}
	return err
}

// RetryDocument queues a failed document's ingestion again; a document
// that is no longer failed is left as it is.
func (s *Service) RetryDocument(ctx context.Context, user, doc int64) error {
	err := s.store.RequeueDocument(ctx, user, doc, s.EnqueueIngest(ctx))
	if errors.Is(err, db.ErrNotFound) {
		return nil
	}
	return err
}

// SearchKB ranks the chunks of one knowledge base for the question of its
// page's search box (at most 2,000 characters), the relevant and the rest,
// and returns the queries rw's model searched beyond the question when the
// knowledge base rewrites questions.
func (s *Service) SearchKB(ctx context.Context, user int64, kb db.KnowledgeBase, question string, rw Rewriter) ([]Result, []string, error) {
	if utf8.RuneCountInString(question) > 2000 {
		return nil, nil, usererr.New("The question is longer than 2,000 characters.")
	}
	res, queries, err := s.SearchRewritten(ctx, Query{User: user, KBs: []db.KnowledgeBase{kb}, Text: question, All: true, TopK: kb.TopK}, rw)
	if msg, ok := usererr.Message(err); ok {
		return nil, nil, usererr.Wrap(err, usererr.Capitalize(msg))
	}
	return res, queries, err
}
