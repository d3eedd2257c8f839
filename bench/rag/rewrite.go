package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"weft/rag"
)

// rewriting is the evaluation's query rewriting (-rewrite): the chat model
// that rewrites, and what it did.
type rewriting struct {
	model     string // "": the rows without rewriting only
	asked     int    // searches that asked the model
	rewritten int    // searches that got queries beyond the question
	queries   int    // those queries
	took      time.Duration
	plain     int // searches without rewriting, and their time
	plainTook time.Duration
}

// search asks like the product: with rewrite, as a knowledge base with
// query rewriting on, rewritten by e.rw.model.
func (e *env) search(ctx context.Context, q rag.Query, rewrite bool) ([]rag.Result, error) {
	if !rewrite {
		start := time.Now()
		res, err := e.svc.Search(ctx, q)
		e.rw.plainTook += time.Since(start)
		e.rw.plain++
		return res, err
	}
	q.KBs = slices.Clone(q.KBs)
	for i := range q.KBs {
		q.KBs[i].RewriteQueries = true
	}
	start := time.Now()
	res, queries, err := e.svc.SearchRewritten(ctx, q, rag.Rewriter{Model: e.rw.model})
	e.rw.took += time.Since(start)
	e.rw.asked++
	if len(queries) > 0 {
		e.rw.rewritten++
		e.rw.queries += len(queries)
	}
	return res, err
}

// report says what the model did since the last report, and starts over.
func (rw *rewriting) report(w io.Writer) {
	if rw.asked == 0 {
		return
	}
	ms := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / 1000 / float64(max(n, 1)) }
	fmt.Fprintf(w, "query rewriting with %s: %d of %d searches got queries beyond the question (%d in all); "+
		"%.1f ms a search with rewriting, %.1f ms without\n",
		rw.model, rw.rewritten, rw.asked, rw.queries, ms(rw.took, rw.asked), ms(rw.plainTook, rw.plain))
	*rw = rewriting{model: rw.model}
}
