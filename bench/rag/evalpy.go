package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

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
// mode's rank and the documents hybrid ranked first.
func evaluatePython(ctx context.Context, w io.Writer, e *env, dir, root, model string) error {
	s, err := loadEvalSet(dir, root)
	if err != nil {
		return err
	}
	dims, err := e.svc.Dimensions(ctx, model)
	if err != nil {
		return err
	}
	kb, err := e.store.CreateKB(ctx, e.user.ID, e.ws.ID, db.KBInput{Name: "eval-python", EmbedModel: model, Dims: dims})
	if err != nil {
		return err
	}
	start := time.Now()
	for _, p := range s.Pages {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		if _, err := e.store.AddDocument(ctx, e.user.ID, kb.ID, db.NewDocument{Name: p, SHA256: hex.EncodeToString(sum[:]), Data: data},
			e.svc.EnqueueIngest(ctx)); err != nil {
			return err
		}
	}
	chunks, err := waitReady(ctx, e, kb.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nSecond set: %s over %s\n", dir, root)
	fmt.Fprintf(w, "corpus: %d pages, %d chunks (chunk size %d, overlap %d), ingested in %.1f s; %d questions\n\n",
		len(s.Pages), chunks, kb.ChunkSize, kb.ChunkOverlap, time.Since(start).Seconds(), len(s.Questions))
	modes := []struct {
		name string
		mode rag.Mode
	}{{"text", rag.TextOnly}, {"vector", rag.VectorOnly}, {fmt.Sprintf("hybrid %.2g", rag.DefaultVectorWeight), rag.Hybrid}}
	fmt.Fprintf(w, "%-12s %-8s %4s %7s %7s %7s %7s %13s\n", "mode", "part", "n", "hit@1", "hit@3", "hit@6", "hit@10", "first=target")
	// ranks[q][mode] is the hit rank (0: none in the top 10); top3 the
	// first documents the default mode (hybrid, the last) retrieved.
	ranks := make(map[string][]int, len(s.Questions))
	top3 := make(map[string][]string, len(s.Questions))
	for mi, m := range modes {
		for _, part := range []string{"dev", "heldout"} {
			var n, first int
			hits := make([]int, len(evalKs))
			for _, q := range s.Questions {
				if q.Split != part {
					continue
				}
				res, err := e.svc.Search(ctx, rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: q.Question, Mode: m.mode, TopK: 10, All: true})
				if err != nil {
					return err
				}
				n++
				res = res[:min(len(res), evalKs[len(evalKs)-1])] // the fused list may run longer
				docs := make([]string, len(res))
				texts := make([]string, len(res))
				for i, r := range res {
					docs[i], texts[i] = r.Document, r.Text
				}
				rank := hitRank(docs, texts, q.Page, q.Answer)
				for i, k := range evalKs {
					if rank > 0 && rank <= k {
						hits[i]++
					}
				}
				if len(docs) > 0 && docs[0] == q.Page {
					first++
				}
				if ranks[q.ID] == nil {
					ranks[q.ID] = make([]int, len(modes))
				}
				ranks[q.ID][mi] = rank
				top3[q.ID] = docs[:min(3, len(docs))]
			}
			fmt.Fprintf(w, "%-12s %-8s %4d", m.name, part, n)
			for _, h := range hits {
				fmt.Fprintf(w, " %7.3f", ratio(h, n))
			}
			fmt.Fprintf(w, " %13.3f\n", ratio(first, n))
		}
	}
	fmt.Fprintf(w, "\nDev questions missed at 6 by some mode: the hit rank in text/vector/hybrid (- : not in the top 10),\n"+
		"the question, the target page and the top 3 documents of hybrid.\n")
	for _, q := range s.Questions {
		rs := ranks[q.ID]
		if q.Split != "dev" || (!missed(rs[0]) && !missed(rs[1]) && !missed(rs[2])) {
			continue
		}
		fmt.Fprintf(w, "  %-6s %s/%s/%s  %s\n         target %s; top 3: %s\n", q.ID, rankText(rs[0]), rankText(rs[1]), rankText(rs[2]),
			q.Question, q.Page, strings.Join(top3[q.ID], ", "))
	}
	return nil
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
