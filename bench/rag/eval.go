package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"weft/db"
	"weft/rag"
)

type question struct {
	ID       string `json:"id"`
	Question string `json:"question"`
	Doc      string `json:"doc"`
	Passage  string `json:"passage"`
}

// evaluate ingests the corpus into one knowledge base (through the real
// job queue), asks every question in each mode, and reports recall@5 and
// MRR (over the top 10): a retrieved chunk is right when it comes from the
// expected document and contains the expected passage (or, for a passage
// cut by a chunk boundary, its first or second half).
func evaluate(ctx context.Context, w io.Writer, e *env, dir, model string, weights []float64) error {
	raw, err := os.ReadFile(filepath.Join(dir, "questions.json"))
	if err != nil {
		return err
	}
	var qs []question
	if err := json.Unmarshal(raw, &qs); err != nil {
		return fmt.Errorf("questions.json: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "corpus", "*.md"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no corpus in %s/corpus", dir)
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = filepath.Base(f)
	}
	start := time.Now()
	kb, chunks, err := ingestFiles(ctx, e, "eval", model, files, names)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Retrieval evaluation — %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "corpus: %d documents, %d chunks (chunk size %d, overlap %d), ingested in %.1f s; %d questions\n",
		len(files), chunks, kb.ChunkSize, kb.ChunkOverlap, time.Since(start).Seconds(), len(qs))
	fmt.Fprintf(w, "embedding model: %s (%d dimensions) at %s\n\n", model, kb.Dims, e.host)
	fmt.Fprintf(w, "%-30s %10s %8s %10s\n", "mode", "recall@5", "MRR@10", "misses@5")
	type variant struct {
		name    string
		mode    rag.Mode
		weight  float64
		rewrite bool
	}
	variants := []variant{{"vector", rag.VectorOnly, 0, false}, {"text", rag.TextOnly, 0, false}}
	for _, wt := range weights {
		variants = append(variants, variant{fmt.Sprintf("hybrid (vector weight %.2g)", wt), rag.Hybrid, wt, false})
	}
	if e.rw.model != "" {
		for _, v := range slices.Clone(variants) {
			variants = append(variants, variant{v.name + " +rw", v.mode, v.weight, true})
		}
	}
	for _, v := range variants {
		mode := v.name
		var hit5, rr float64
		var misses []string
		for _, q := range qs {
			res, err := e.search(ctx, rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: q.Question, Mode: v.mode,
				VectorWeight: v.weight, TopK: 10, All: true}, v.rewrite)
			if err != nil {
				return err
			}
			rank := 0
			for i, r := range res {
				if i >= 10 {
					break
				}
				if r.Document == q.Doc && contains(r.Text, q.Passage) {
					rank = i + 1
					break
				}
			}
			if rank > 0 && rank <= 5 {
				hit5++
			} else {
				misses = append(misses, q.ID)
			}
			if rank > 0 {
				rr += 1 / float64(rank)
			}
		}
		n := float64(len(qs))
		fmt.Fprintf(w, "%-30s %10.3f %8.3f %10d\n", mode, hit5/n, rr/n, len(misses))
		sort.Strings(misses)
		fmt.Fprintf(w, "         missed: %s\n", strings.Join(misses, " "))
	}
	e.rw.report(w)
	return nil
}

// ingestFiles creates a knowledge base and ingests the files into it, under
// the given document names, through the real job queue, and returns it with
// its number of chunks once every document is ready.
func ingestFiles(ctx context.Context, e *env, name, model string, files, names []string) (db.KnowledgeBase, int, error) {
	dims, err := e.svc.Dimensions(ctx, model)
	if err != nil {
		return db.KnowledgeBase{}, 0, err
	}
	kb, err := e.store.CreateKB(ctx, e.user.ID, e.ws.ID, db.KBInput{Name: name, EmbedModel: model, Dims: dims})
	if err != nil {
		return kb, 0, err
	}
	for i, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return kb, 0, err
		}
		sum := sha256.Sum256(data)
		if _, err := e.store.AddDocument(ctx, e.user.ID, kb.ID, db.NewDocument{Name: names[i], SHA256: hex.EncodeToString(sum[:]), Data: data},
			e.svc.EnqueueIngest(ctx)); err != nil {
			return kb, 0, err
		}
	}
	chunks, err := waitReady(ctx, e, kb.ID)
	return kb, chunks, err
}

// contains tells whether a chunk holds the passage, or one of its halves
// when a chunk boundary cut it.
func contains(text, passage string) bool {
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	t, p := norm(text), norm(passage)
	if strings.Contains(t, p) {
		return true
	}
	if len(p) < 40 {
		return false
	}
	return strings.Contains(t, p[:len(p)/2]) || strings.Contains(t, p[len(p)/2:])
}

// waitReady waits for every document of the knowledge base and returns the
// number of chunks.
func waitReady(ctx context.Context, e *env, kb int64) (int, error) {
	for {
		docs, err := e.store.Documents(ctx, e.user.ID, kb)
		if err != nil {
			return 0, err
		}
		busy, chunks := false, 0
		for _, d := range docs {
			switch d.Status {
			case db.DocQueued, db.DocProcessing:
				busy = true
			case db.DocFailed:
				return 0, fmt.Errorf("%s failed: %s", d.Name, d.Error)
			}
			chunks += d.Chunks
		}
		if !busy {
			return chunks, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}
