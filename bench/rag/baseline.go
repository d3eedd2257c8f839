package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"weft/extract"
	"weft/internal/fakeollama"
	"weft/rag"
)

// The textbook baselines the issue measured Weft against, run on the second
// set so that Weft's numbers can be read beside them: BM25 (k1 1.2, b 0.75,
// Robertson–Spärck Jones IDF, exact term frequencies) over passages of about
// 1,500 characters cut from each page's text with 200 of overlap, stemmed by
// PostgreSQL's english configuration; the in-repo trigram embedder alone;
// and the two fused by reciprocal rank (k 60). No title, no headings, no
// identifiers: each passage is just its text. -mode baseline.

const (
	basePassage = 1500
	baseOverlap = 200
	baseK1      = 1.2
	baseB       = 0.75
	baseRRF     = 60
	baseDims    = 256
)

type basePassageT struct {
	page string
	text string
	tf   map[string]int
	len  int
	vec  []float32
}

// passages cuts text into windows of about size characters overlapping by
// overlap, each ending at a space where there is one in its last fifth.
func passages(text string, size, overlap int) []string {
	var out []string
	for start := 0; start < len(text); {
		end := min(start+size, len(text))
		if end < len(text) {
			if i := strings.LastIndexByte(text[start:end], ' '); i > size*4/5 {
				end = start + i
			}
		}
		out = append(out, text[start:end])
		if end == len(text) {
			break
		}
		next := end - overlap
		if i := strings.IndexByte(text[next:end], ' '); i >= 0 {
			next += i + 1
		}
		start = max(next, start+1)
	}
	return out
}

// lexemes is PostgreSQL's english analysis of each text: its lexemes and
// how often each occurs.
func lexemes(ctx context.Context, e *env, texts []string) ([]map[string]int, error) {
	rows, err := e.store.Pool.Query(ctx, `SELECT t.i, l.lexeme, coalesce(array_length(l.positions, 1), 1)
		FROM unnest($1::text[]) WITH ORDINALITY AS t(body, i), unnest(to_tsvector('english', t.body)) AS l`, texts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]map[string]int, len(texts))
	for i := range out {
		out[i] = map[string]int{}
	}
	for rows.Next() {
		var i int64
		var l string
		var n int
		if err := rows.Scan(&i, &l, &n); err != nil {
			return nil, err
		}
		out[i-1][l] = n
	}
	return out, rows.Err()
}

func baseline(ctx context.Context, w io.Writer, e *env, dir, root string) error {
	s, err := loadEvalSet(dir, root)
	if err != nil {
		return err
	}
	texts, err := readPages(ctx, s)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Textbook baselines on %s (%d pages)\n", dir, len(s.Pages))
	fmt.Fprintf(w, "bm25: k1 %.1f, b %.2f, english stemming (PostgreSQL); vector: the in-repo trigram embedder, %d dimensions; fusion: reciprocal rank, k %d\n",
		baseK1, baseB, baseDims, baseRRF)
	flat := map[string][]string{}
	for _, page := range s.Pages {
		flat[page] = passages(texts[page], basePassage, baseOverlap)
	}
	if err := baselineOn(ctx, w, e, s, fmt.Sprintf("passages of about %d characters (overlap %d) cut from each page's text, no titles or headings", basePassage, baseOverlap), flat); err != nil {
		return err
	}
	chunks, withContext := map[string][]string{}, map[string][]string{}
	for _, page := range s.Pages {
		data, err := os.ReadFile(filepath.Join(s.Root, page))
		if err != nil {
			return err
		}
		blocks, err := extract.Read(ctx, extract.FormatHTML, data, extract.Limits{})
		if err != nil {
			return err
		}
		for _, c := range rag.Split(blocks, rag.ChunkOptions{Size: basePassage, Overlap: baseOverlap}) {
			chunks[page] = append(chunks[page], c.Text)
			withContext[page] = append(withContext[page], rag.EmbedText(rag.DocTitle(page), c.Headings, c.Text))
		}
	}
	if err := baselineOn(ctx, w, e, s, "Weft's chunks (rag.Split, size 1500, overlap 200), text alone", chunks); err != nil {
		return err
	}
	return baselineOn(ctx, w, e, s, "Weft's chunks with their title and headings in front (rag.EmbedText)", withContext)
}

// baselineOn runs the baselines over the passages of each page.
func baselineOn(ctx context.Context, w io.Writer, e *env, s *evalSet, what string, byPage map[string][]string) error {
	var ps []*basePassageT
	df := map[string]int{}
	total := 0
	for _, page := range s.Pages {
		cut := byPage[page]
		tfs, err := lexemes(ctx, e, cut)
		if err != nil {
			return err
		}
		for i, t := range cut {
			tf := tfs[i]
			p := &basePassageT{page: page, text: t, tf: tf, vec: fakeollama.Vector(t, baseDims)}
			for l, n := range tf {
				df[l]++
				p.len += n
			}
			total += p.len
			ps = append(ps, p)
		}
	}
	avg := float64(total) / float64(len(ps))
	N := float64(len(ps))
	idf := func(l string) float64 {
		n := float64(df[l])
		return math.Log(1 + (N-n+0.5)/(n+0.5))
	}
	type ranked []int // passage indexes, best first
	bm25 := func(q map[string]int) ranked {
		scores := make([]float64, len(ps))
		for i, p := range ps {
			for l := range q {
				tf := float64(p.tf[l])
				if tf == 0 {
					continue
				}
				scores[i] += idf(l) * tf * (baseK1 + 1) / (tf + baseK1*(1-baseB+baseB*float64(p.len)/avg))
			}
		}
		return order(scores)
	}
	vector := func(q string) ranked {
		v := fakeollama.Vector(q, baseDims)
		scores := make([]float64, len(ps))
		for i, p := range ps {
			for j := range v {
				scores[i] += float64(v[j] * p.vec[j])
			}
		}
		return order(scores)
	}
	fuse := func(a, b ranked) ranked {
		scores := make([]float64, len(ps))
		for _, r := range []ranked{a, b} {
			for rank, i := range r[:min(100, len(r))] {
				scores[i] += 1 / float64(baseRRF+rank+1)
			}
		}
		return order(scores)
	}
	modes := []string{"bm25", "trigram vector", "bm25+vector rrf"}
	type tally struct {
		n, first int
		hits     [4]int
	}
	res := map[string]*tally{}
	qtexts := make([]string, len(s.Questions))
	for i, q := range s.Questions {
		qtexts[i] = q.Question
	}
	qls, err := lexemes(ctx, e, qtexts)
	if err != nil {
		return err
	}
	for qi, q := range s.Questions {
		b, v := bm25(qls[qi]), vector(q.Question)
		for mi, r := range []ranked{b, v, fuse(b, v)} {
			key := modes[mi] + "/" + q.Split
			t := res[key]
			if t == nil {
				t = &tally{}
				res[key] = t
			}
			t.n++
			if ps[r[0]].page == q.Page {
				t.first++
			}
			for rank, i := range r[:10] {
				if ps[i].page == q.Page && contains(ps[i].text, q.Answer) {
					for ki, k := range evalKs {
						if rank < k {
							t.hits[ki]++
						}
					}
					break
				}
			}
		}
	}
	fmt.Fprintf(w, "\n%d passages: %s\n", len(ps), what)
	fmt.Fprintf(w, "%-18s %-8s %4s %7s %7s %7s %7s %13s\n", "mode", "part", "n", "hit@1", "hit@3", "hit@6", "hit@10", "first=target")
	for _, m := range modes {
		for _, part := range []string{"dev", "heldout"} {
			t := res[m+"/"+part]
			if t == nil {
				continue
			}
			fmt.Fprintf(w, "%-18s %-8s %4d", m, part, t.n)
			for _, h := range t.hits {
				fmt.Fprintf(w, " %7.3f", ratio(h, t.n))
			}
			fmt.Fprintf(w, " %13.3f\n", ratio(t.first, t.n))
		}
	}
	return nil
}

// order is the indexes of scores, highest first (ties by index).
func order(scores []float64) []int {
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		}
		return 0
	})
	return idx
}
