package rag

import (
	"context"
	"slices"

	"weft/db"
)

// Passage scoring: after fusion, the best candidates of a knowledge base
// are scored again by their best window — BM25 of the question's words
// within the window of passageWindow words of the chunk's text that scores
// highest — so that a chunk where the question's words sit together
// outranks one where they are scattered over 1,500 characters. Chosen on
// the dev part of the second evaluation set (docs/PERFORMANCE.md, "Passage
// scoring"): windows of 40–60 words at weights 0.2–0.5 all sent the
// passage and ranked the target page first at least as often as without;
// 0.2, because at 0.3 a question of the first set fell from rank 1 to 2.

const (
	// passageWindow is the window's length in words (the positions of the
	// chunk's full-text vector, which count stop words too): about two or
	// three sentences.
	passageWindow = 50
	// passageWeight weighs the window's score, scaled to [0, 1] over the
	// candidates, against the fused score (text 1, vector VectorWeight).
	passageWeight = 0.2
	// passageDepth is how many of the fused best are scored: the positions
	// of the question's words are read for these chunks only, so the cost
	// does not grow with the knowledge base.
	passageDepth = 60
)

// scorePassages adds the best-window part to the fused score of the
// passageDepth best of res (one knowledge base's results) and sorts them
// again; res beyond them keep their place (they were below and stay below:
// parts are never negative).
func (s *Service) scorePassages(ctx context.Context, q Query, kb db.KnowledgeBase, words db.TextQuery, res []Result) error {
	sortResults(res)
	head := res[:min(passageDepth, len(res))]
	ids := make([]int64, len(head))
	for i, r := range head {
		ids[i] = r.ChunkID
	}
	tps, err := s.store.TermPositions(ctx, q.User, kb, words, ids)
	if err != nil {
		return err
	}
	best := bestWindows(tps, passageWindow)
	var lo, hi float64
	for i, r := range head {
		v := best[r.ChunkID]
		if i == 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	if hi <= lo {
		return nil // nothing to tell the candidates apart
	}
	for i := range head {
		v := best[head[i].ChunkID]
		head[i].PassageScore = v
		head[i].PassagePart = passageWeight * (v - lo) / (hi - lo)
		head[i].Fused += head[i].PassagePart
	}
	sortResults(head)
	return nil
}

// sortResults orders results best first: by fused score, then by
// similarity, then by chunk id (a stable order for equal scores).
func sortResults(res []Result) {
	slices.SortFunc(res, func(a, b Result) int {
		switch {
		case a.Fused != b.Fused:
			if a.Fused > b.Fused {
				return -1
			}
			return 1
		case a.Similarity != b.Similarity:
			if a.Similarity > b.Similarity {
				return -1
			}
			return 1
		}
		return int(a.ChunkID - b.ChunkID)
	})
}

// occurrence is one position of one of the question's words in a chunk.
type occurrence struct {
	pos  int32
	term int
}

// bestWindows returns each chunk's best-window score: the highest, over
// every window of width words of its text, of Σ idf × tf(k1+1)/(tf+k1)
// over the question's words, tf counted within the window (BM25 without
// length normalisation: every window has the same length). Positions in
// the chunk's title and heading path, which every chunk of a section
// shares, are left out.
func bestWindows(tps []db.TermPosition, width int32) map[int64]float64 {
	byChunk := map[int64][]db.TermPosition{}
	for _, t := range tps {
		byChunk[t.ChunkID] = append(byChunk[t.ChunkID], t)
	}
	out := make(map[int64]float64, len(byChunk))
	for id, ts := range byChunk {
		var occs []occurrence
		for i, t := range ts {
			for _, p := range t.Positions {
				if p > t.HeadEnd {
					occs = append(occs, occurrence{p, i})
				}
			}
		}
		slices.SortFunc(occs, func(a, b occurrence) int { return int(a.pos - b.pos) })
		tf := make([]int, len(ts))
		score := func() float64 {
			s := 0.0
			for i, n := range tf {
				if n > 0 {
					s += ts[i].IDF * float64(n) * (db.BM25K1 + 1) / (float64(n) + db.BM25K1)
				}
			}
			return s
		}
		lo := 0
		for hi := range occs {
			tf[occs[hi].term]++
			for occs[hi].pos-occs[lo].pos >= width {
				tf[occs[lo].term]--
				lo++
			}
			out[id] = max(out[id], score())
		}
	}
	return out
}
