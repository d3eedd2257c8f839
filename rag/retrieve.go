package rag

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"weft/db"
)

// Mode chooses how chunks are ranked.
type Mode string

// Retrieval modes. Hybrid is the default because it wins the evaluation in
// docs/PERFORMANCE.md (make eval-rag).
const (
	Hybrid     Mode = "hybrid"
	VectorOnly Mode = "vector"
	TextOnly   Mode = "text"
)

// candidates is how many chunks each search contributes before fusion.
// Each side's scores are scaled over this many of its best (at least): the
// depth chosen on the dev part of the second evaluation set (40 and 100
// did worse).
func candidates(topK int) int { return max(60, topK) }

// Query is one retrieval.
type Query struct {
	User int64
	KBs  []db.KnowledgeBase
	Text string
	Mode Mode // "" : Hybrid
	// TopK overrides the knowledge bases' own top-k (0: the largest of theirs).
	TopK int
	// All keeps chunks below the relevance threshold (the retrieval view
	// shows them, marked).
	All bool
	// VectorWeight weighs the vector side in the fusion (0: DefaultVectorWeight).
	VectorWeight float64
}

// DefaultVectorWeight is the weight of the vector side against the text
// side (1) in the fusion: each side's scores are scaled to [0, 1] over its
// own list (from the lowest listed to the highest) and added, weighted. Chosen on the dev part of the second
// evaluation set (make eval-rag, in-repo lexical embedder), where scores
// beat reciprocal rank fusion (which ranks by position only, however far
// apart the scores): at 0.15 hybrid sends the passage more often than text
// alone and ranks the target page first more often (0.1, 0.2, 0.3 and 0.5
// lose one or the other); see docs/PERFORMANCE.md. With a real embedding
// model, run the evaluation against it (-ollama) before changing this.
const DefaultVectorWeight = 0.15

// Result is a ranked chunk with how it ranked.
type Result struct {
	db.Source
	Relevant bool // passed the knowledge base's threshold
}

// Search ranks chunks of the knowledge bases for a question: a vector search
// and a full-text search per knowledge base (each with the access filter in
// its query), their scores fused (see DefaultVectorWeight), the best of them
// then scored by their best window of words (passage scoring, proximity.go;
// not in vector-only mode). A chunk is relevant when its
// similarity reaches the knowledge base's threshold or the text search found
// it.
func (s *Service) Search(ctx context.Context, q Query) ([]Result, error) {
	if q.Mode == "" {
		q.Mode = Hybrid
	}
	if q.VectorWeight == 0 {
		q.VectorWeight = DefaultVectorWeight
	}
	topK := q.TopK
	for _, kb := range q.KBs {
		if q.TopK == 0 {
			topK = max(topK, kb.TopK)
		}
	}
	var all []Result
	words := db.TextQuery{Text: q.Text, Idents: Identifiers(q.Text)}
	for _, kb := range q.KBs {
		found, err := s.searchKB(ctx, q, kb, words, candidates(topK))
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			// The knowledge base may have switched to another embedding
			// model since kb was read (its old chunks are gone): search
			// the current one.
			if cur, err := s.store.KB(ctx, q.User, kb.ID); err == nil && cur.Generation != kb.Generation {
				if found, err = s.searchKB(ctx, q, cur, words, candidates(topK)); err != nil {
					return nil, err
				}
			}
		}
		all = append(all, found...)
	}
	sortResults(all)
	if !q.All {
		all = slices.DeleteFunc(all, func(r Result) bool { return !r.Relevant })
	}
	if len(all) > topK && !q.All {
		all = all[:topK]
	}
	for i := range all {
		all[i].N = i + 1
	}
	return all, nil
}

// ErrSearch wraps a failed search (the message says what to do).
var ErrSearch = fmt.Errorf("the knowledge base could not be searched")

// SearchError is a failed search whose message is written for the user.
type SearchError struct{ Msg string }

func (e SearchError) Error() string { return e.Msg }

// UserMessage is the message for the user (a usererr.Messager): it is
// written for them.
func (e SearchError) UserMessage() string { return e.Msg }

// Is makes errors.Is(err, ErrSearch) hold.
func (SearchError) Is(target error) bool { return target == ErrSearch }

// searchKB runs the vector and text searches of one knowledge base, fuses
// their scores and scores the best again by their best window.
func (s *Service) searchKB(ctx context.Context, q Query, kb db.KnowledgeBase, words db.TextQuery, n int) ([]Result, error) {
	byID := map[int64]*Result{}
	var order []int64
	add := func(h db.ChunkHit) *Result {
		r := byID[h.ChunkID]
		if r == nil {
			r = &Result{Source: db.Source{ChunkID: h.ChunkID, DocumentID: h.DocumentID, KBID: kb.ID, KB: kb.Name,
				Document: h.Document, Page: h.Page, Headings: h.Headings, Text: h.Text, Position: h.Position}}
			byID[h.ChunkID] = r
			order = append(order, h.ChunkID)
		}
		return r
	}
	// The text query needs no embedding: it runs while the question is
	// embedded and the vector query runs (for that moment the search holds
	// two of the pool's connections). The first error cancels the other
	// side and is the one returned (errgroup).
	var vhits []db.ChunkHit
	var thits []db.TextHit
	g, gctx := errgroup.WithContext(ctx)
	if q.Mode != VectorOnly {
		g.Go(func() error {
			var err error
			thits, err = s.store.TextSearch(gctx, q.User, kb, words, n)
			return err
		})
	}
	if q.Mode != TextOnly {
		g.Go(func() error {
			ectx, cancel := context.WithTimeout(gctx, time.Minute)
			vs, err := s.embed(ectx, kb.EmbedModel, []string{q.Text})
			cancel()
			if err != nil {
				return SearchError{Msg: ErrSearch.Error() + ": " + s.describeEmbedError(err, kb.EmbedModel)}
			}
			vhits, err = s.store.VectorSearch(gctx, q.User, kb, vs[0], n)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if q.Mode != TextOnly {
		lo, hi := scoreRange(vhits)
		for i, h := range vhits {
			r := add(h)
			r.VectorRank, r.Similarity = i+1, h.Score
			r.VectorPart = q.VectorWeight * (h.Score - lo) / (hi - lo)
			r.Fused += r.VectorPart
			if h.Score >= kb.MinSimilarity {
				r.Relevant = true
			}
		}
	}
	tlo, thi := scoreRange(textHits(thits))
	for i, h := range thits {
		r := add(h.ChunkHit)
		r.TextRank, r.TextScore, r.TextWhy = i+1, h.Score, h.Why
		r.TextPart = (h.Score - tlo) / (thi - tlo)
		r.Fused += r.TextPart
		r.Relevant = true
	}
	out := make([]Result, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	if q.Mode != VectorOnly && len(out) > 0 {
		if err := s.scorePassages(ctx, q, kb, words, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// scoreRange is the lowest and the highest score of hits (best first),
// apart when they are equal so that scaling by them divides by no zero.
func scoreRange(hits []db.ChunkHit) (lo, hi float64) {
	if len(hits) == 0 {
		return 0, 1
	}
	hi, lo = hits[0].Score, hits[len(hits)-1].Score
	if hi <= lo {
		lo = hi - 1
	}
	return lo, hi
}

// textHits are the chunks of text hits, for scoreRange.
func textHits(h []db.TextHit) []db.ChunkHit {
	out := make([]db.ChunkHit, len(h))
	for i := range h {
		out[i] = h[i].ChunkHit
	}
	return out
}
