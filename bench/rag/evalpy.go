package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"weft/chat"
	"weft/db"
	"weft/rag"
)

// evalKs are the cut-offs of the second set's hit@k.
var evalKs = []int{1, 3, 6, 10}

// evaluatePython runs the second set (rag/testdata/eval-python, over
// Debian's python3.11-doc pages): it ingests the subset into one knowledge
// base through the real job queue, then, for text, vector and hybrid at the
// default weight, on the dev and the held-out part, reports hit@1/3/6/10
// (the answer phrase, or a half of it cut by a chunk boundary, in one of the
// top k chunks of the target page) and how often the first source is the
// target page; then each dev question some mode misses at 6, with every
// mode's rank and the documents hybrid ranked first. With devOnly the
// held-out questions are not asked.
func evaluatePython(ctx context.Context, w io.Writer, e *env, dir, root, model string, devOnly bool) error {
	s, err := loadEvalSet(dir, root)
	if err != nil {
		return err
	}
	parts := []string{"dev", "heldout"}
	if devOnly {
		s.Questions = slices.DeleteFunc(s.Questions, func(q pyQuestion) bool { return q.Split != "dev" })
		parts = parts[:1]
	}
	files := make([]string, len(s.Pages))
	for i, p := range s.Pages {
		files[i] = filepath.Join(root, p)
	}
	start := time.Now()
	kb, chunks, err := ingestFiles(ctx, e, "eval-python", model, files, s.Pages)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nSecond set: %s over %s\n", dir, root)
	fmt.Fprintf(w, "corpus: %d pages, %d chunks (chunk size %d, overlap %d), ingested in %.1f s; %d questions\n\n",
		len(s.Pages), chunks, kb.ChunkSize, kb.ChunkOverlap, time.Since(start).Seconds(), len(s.Questions))
	out, err := askAll(ctx, e, kb, s.Questions)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%-14s %-8s %4s %7s %7s %7s %7s %13s %6s %7s %12s %10s\n", "mode", "part", "n", "hit@1", "hit@3", "hit@6", "hit@10", "first=target",
		"sent", "sources", "first sent", "ms/search")
	for mi, m := range e.modes() {
		for _, part := range parts {
			var n, first, sent, sentFirst, nsent int
			var took time.Duration
			hits := make([]int, len(evalKs))
			for _, q := range s.Questions {
				if q.Split != part {
					continue
				}
				n++
				o := out[q.ID][mi]
				for i, k := range evalKs {
					if o.rank > 0 && o.rank <= k {
						hits[i]++
					}
				}
				if o.first {
					first++
				}
				if o.sent {
					sent++
				}
				if o.sentFirst {
					sentFirst++
				}
				nsent += o.nsent
				took += o.took
			}
			fmt.Fprintf(w, "%-14s %-8s %4d", m.name, part, n)
			for _, h := range hits {
				fmt.Fprintf(w, " %7.3f", ratio(h, n))
			}
			fmt.Fprintf(w, " %13.3f %6.3f %7.1f %12.3f %10.1f\n", ratio(first, n), ratio(sent, n), float64(nsent)/float64(max(n, 1)), ratio(sentFirst, n),
				float64(took.Microseconds())/1000/float64(max(n, 1)))
		}
	}
	fmt.Fprintf(w, "\nDev questions missed at 6 by some mode: the hit rank in text/vector/hybrid (- : not in the top 10),\n"+
		"the question, the target page and the top 3 documents of hybrid.\n")
	for _, q := range s.Questions {
		o := out[q.ID]
		if q.Split != "dev" || (!missed(o[0].rank) && !missed(o[1].rank) && !missed(o[2].rank)) {
			continue
		}
		fmt.Fprintf(w, "  %-6s %s/%s/%s  %s\n         target %s; top 3: %s\n", q.ID, rankText(o[0].rank), rankText(o[1].rank), rankText(o[2].rank),
			q.Question, q.Page, strings.Join(o[2].top3, ", "))
	}
	e.rw.report(w)
	return nil
}

// evalModes are the modes the second set is asked in; hybrid, at the
// default weight, is last.
var evalModes = []evalMode{{"text", rag.TextOnly, false}, {"vector", rag.VectorOnly, false},
	{fmt.Sprintf("hybrid %.2g", rag.DefaultVectorWeight), rag.Hybrid, false}}

type evalMode struct {
	name    string
	mode    rag.Mode
	rewrite bool
}

// modes are evalModes, then with -rewrite each of them with query rewriting.
func (e *env) modes() []evalMode {
	out := slices.Clone(evalModes)
	if e.rw.model != "" {
		for _, m := range evalModes {
			out = append(out, evalMode{m.name + " +rw", m.mode, true})
		}
	}
	return out
}

// outcome is how one question fared in one mode: the hit rank (0: none in
// the top 10), whether the first chunk is from the target page, and the
// documents of the first three chunks.
type outcome struct {
	rank  int
	first bool
	top3  []string
	// The sources an answer would be sent (rag.Choose within
	// chat.SourceChars of the default window): whether they hold the
	// passage, whether the first is from the target page, how many.
	sent, sentFirst bool
	nsent           int
	// took is the search's time (the first of the two, ranking the top 10).
	took time.Duration
}

// evalWindow is the window the sources sent are chosen for: Weft's default
// cap (WEFT_MAX_NUM_CTX), with the default 4 characters a token.
const evalWindow = 8192

// sentOf is what the sources of an answer asked in mode would hold.
func sentOf(ctx context.Context, e *env, kb db.KnowledgeBase, q pyQuestion, m evalMode) (sent, first bool, n int, err error) {
	res, err := e.search(ctx, rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: q.Question, Mode: m.mode, TopK: 3 * kb.TopK}, m.rewrite)
	if err != nil {
		return false, false, 0, err
	}
	src := rag.Choose(res, chat.SourceChars(evalWindow, nil, 4), kb.TopK)
	for _, s := range src {
		sent = sent || s.Document == q.Page && contains(s.Text, q.Answer)
	}
	return sent, len(src) > 0 && src[0].Document == q.Page, len(src), nil
}

// askAll asks every question in every mode of evalModes and returns the
// outcomes by question id, in the order of evalModes.
func askAll(ctx context.Context, e *env, kb db.KnowledgeBase, qs []pyQuestion) (map[string][]outcome, error) {
	out := make(map[string][]outcome, len(qs))
	maxK := evalKs[len(evalKs)-1]
	for _, q := range qs {
		for _, m := range e.modes() {
			start := time.Now()
			res, err := e.search(ctx, rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: q.Question, Mode: m.mode, TopK: maxK, All: true}, m.rewrite)
			if err != nil {
				return nil, err
			}
			took := time.Since(start)
			res = res[:min(len(res), maxK)] // the fused list may run longer
			docs := make([]string, len(res))
			texts := make([]string, len(res))
			for i, r := range res {
				docs[i], texts[i] = r.Document, r.Text
			}
			o := outcome{rank: hitRank(docs, texts, q.Page, q.Answer), first: len(docs) > 0 && docs[0] == q.Page, top3: docs[:min(3, len(docs))],
				took: took}
			if o.sent, o.sentFirst, o.nsent, err = sentOf(ctx, e, kb, q, m); err != nil {
				return nil, err
			}
			out[q.ID] = append(out[q.ID], o)
		}
	}
	return out, nil
}

func missed(rank int) bool { return rank == 0 || rank > 6 }

func rankText(rank int) string {
	if rank == 0 {
		return "-"
	}
	return fmt.Sprint(rank)
}

// hitRank is the 1-based rank of the first retrieved chunk (documents and
// texts side by side) of the target page that holds the answer phrase (or
// a half of it, see contains), or 0.
func hitRank(docs, texts []string, page, answer string) int {
	for i := range docs {
		if docs[i] == page && contains(texts[i], answer) {
			return i + 1
		}
	}
	return 0
}

func ratio(a, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(a) / float64(n)
}
