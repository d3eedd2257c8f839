package rag_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"weft/db"
	"weft/rag"
)

// The text query runs beside the embedding and the vector query: a failed
// embedding is still the search's error (not a text-only result), a text
// search alone needs no model, and a cancelled search ends with an error.
func TestAHybridSearchWhoseEmbeddingFailsReportsItWhileTheTextQueryRunsBeside(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	ctx := context.Background()
	kb := e.kb(e.user, e.ws, "Manuals", "embedder")
	if d := e.wait(e.user, e.add(e.user, kb, "oven.md", sections(20, "oven"))); d.Status != db.DocReady {
		t.Fatalf("%s: %s", d.Status, d.Error)
	}
	kb, err := e.store.KB(ctx, e.user.ID, kb.ID)
	if err != nil {
		t.Fatal(err)
	}
	q := rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: "widget7"}

	e.fake.SetDown(true)
	res, err := e.svc.Search(ctx, q)
	if !errors.Is(err, rag.ErrSearch) || res != nil {
		t.Errorf("hybrid search with the model server down: %v, %d results", err, len(res))
	}
	text := q
	text.Mode = rag.TextOnly
	res, err = e.svc.Search(ctx, text)
	if err != nil || len(res) == 0 || !strings.Contains(res[0].Text, "widget7") || res[0].TextRank != 1 || res[0].VectorRank != 0 {
		t.Errorf("text search with the model server down: %v, %+v", err, res)
	}
	e.fake.SetDown(false)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if res, err := e.svc.Search(cancelled, q); err == nil {
		t.Errorf("a cancelled search returned %d results and no error", len(res))
	}
	res, err = e.svc.Search(ctx, q)
	if err != nil || len(res) == 0 || !strings.Contains(res[0].Text, "widget7") || res[0].VectorRank == 0 || res[0].TextRank == 0 {
		t.Errorf("hybrid search once the model is back: %v, %+v", err, res)
	}
}
