package rag

import (
	"context"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"weft/db"
)

// Sources for an answer: the ranked chunks, each joined with the ranked
// chunks that continue it, taken in rank order while they fit the share of
// the model's window the answer gives them (package chat works it out).

// maxJoinedChars bounds one source made of joined chunks (characters).
const maxJoinedChars = 6000

// Retrieve returns the numbered sources for a rag answer (package chat calls
// it through its Retriever interface): at most the largest top-k of the
// knowledge bases, within maxChars characters (the first source always
// goes, whole). model, asked with num_ctx numCtx, may rewrite the question
// into search queries (SearchRewritten).
func (s *Service) Retrieve(ctx context.Context, user int64, kbs []db.KnowledgeBase, question, model string, numCtx, maxChars int) ([]db.Source, error) {
	most := 0
	for _, kb := range kbs {
		most = max(most, kb.TopK)
	}
	// More ranked chunks than sources: the ones continuing a source are
	// joined to it from anywhere in the list.
	res, _, err := s.SearchRewritten(ctx, Query{User: user, KBs: kbs, Text: question, TopK: 3 * most}, Rewriter{Model: model, NumCtx: numCtx})
	if err != nil {
		return nil, err
	}
	return Choose(res, maxChars, most), nil
}

// Choose takes ranked results in order, each joined with the results that
// continue it (the same document and heading path, the next or previous
// position) while they fit, within budget characters in all, up to most
// sources. A source that does not fit is passed over for a later, shorter
// one.
func Choose(res []Result, budget, most int) []db.Source {
	type at struct {
		doc int64
		pos int
	}
	byPos := make(map[at]int, len(res))
	for i, r := range res {
		byPos[at{r.DocumentID, r.Position}] = i
	}
	used := make([]bool, len(res))
	var out []db.Source
	spent := 0
	for i := range res {
		if used[i] || len(out) == most {
			continue
		}
		src := res[i].Source
		size := runes(src.Text)
		if len(out) > 0 && spent+size > budget {
			continue // a later, shorter one may fit
		}
		// The first source goes even when it alone is over the budget, but
		// grows by neighbours only within it, as every source does.
		room := max(budget-spent, size)
		parts := []int{i}
		next := func(pos int) (int, bool) {
			j, ok := byPos[at{src.DocumentID, pos}]
			return j, ok && !used[j] && !slices.Contains(parts, j) && slices.Equal(res[j].Headings, src.Headings)
		}
		grow := func(j int, after bool) bool {
			text := joinOverlapping(res[j].Text, src.Text)
			if after {
				text = joinOverlapping(src.Text, res[j].Text)
			}
			if n := runes(text); n > room || n > maxJoinedChars {
				return false
			}
			src.Text, parts = text, append(parts, j)
			return true
		}
		for p := src.Position + 1; ; p++ {
			if j, ok := next(p); !ok || !grow(j, true) {
				break
			}
		}
		for p := src.Position - 1; ; p-- {
			j, ok := next(p)
			if !ok || !grow(j, false) {
				break
			}
			src.Position, src.ChunkID, src.Page = res[j].Position, res[j].ChunkID, res[j].Page
		}
		for _, j := range parts {
			used[j] = true
			if res[j].ChunkID != src.ChunkID {
				src.Joined = append(src.Joined, res[j].ChunkID)
			}
		}
		slices.Sort(src.Joined)
		spent += runes(src.Text)
		src.N = len(out) + 1
		out = append(out, src)
	}
	return out
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// minOverlap is the shortest shared edge taken for the chunker's overlap:
// a shorter one (a table's parts, overlap 0) is a coincidence.
const minOverlap = 20

// joinOverlapping joins a chunk and the one after it. When the second
// starts with the end of the first (the chunker's overlap, cut at a word),
// that part is written once; otherwise they are two paragraphs.
func joinOverlapping(a, b string) string {
	for k := min(len(a), len(b)); k >= minOverlap; k-- {
		if !strings.HasSuffix(a, b[:k]) {
			continue
		}
		start := len(a) - k
		if start == 0 || unicode.IsSpace(rune(a[start-1])) || unicode.IsSpace(rune(b[0])) {
			return a + b[k:]
		}
	}
	return a + "\n\n" + b
}
