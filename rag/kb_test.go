package rag_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"weft/db"
	"weft/internal/usererr"
	"weft/rag"
)

// The rules of a knowledge base refuse with the words the pages show.
func TestKnowledgeBaseRulesRefuseWithAMessageForTheUser(t *testing.T) {
	e := newEnv(t, rag.Config{MaxFileBytes: 4 << 10})
	ctx := context.Background()
	kb, name, err := e.svc.CreateKB(ctx, e.user.ID, e.ws.ID, "  Field   notes ", "embedder")
	if err != nil || name != "Field notes" || kb.Name != "Field notes" {
		t.Fatalf("CreateKB = %+v, %q, %v", kb, name, err)
	}
	type refusal struct {
		what string
		err  error
		want string
	}
	var refusals []refusal
	add := func(what string, err error, want string) { refusals = append(refusals, refusal{what, err, want}) }
	_, _, err = e.svc.CreateKB(ctx, e.user.ID, e.ws.ID, strings.Repeat("x", 101), "embedder")
	add("a long name", err, "A knowledge base needs a name of 1 to 100 characters.")
	_, _, err = e.svc.CreateKB(ctx, e.user.ID, e.ws.ID, "Field notes", "embedder")
	add("a taken name", err, `This workspace already has a knowledge base named "Field notes".`)
	_, _, err = e.svc.CreateKB(ctx, e.user.ID, e.ws.ID, "Other", "no-such-model")
	add("a model Ollama lacks", err, `The embedding model "no-such-model" could not be used: it is not on the Ollama server (an administrator can pull it on the Models page first).`)
	_, _, err = e.svc.CreateKB(ctx, e.user.ID, e.ws.ID, "Other", " ")
	add("no model", err, "Choose an embedding model (an administrator can pull one, such as nomic-embed-text, on the Models page).")
	add("bad settings", e.svc.UpdateSettings(ctx, e.user.ID, kb, rag.Settings{ChunkSize: "100", TopK: "x", MinSimilarity: "2"}),
		"Not saved: chunk_size must be a whole number from 200 to 20000; top_k must be a whole number from 1 to 50; min_similarity must be a number from -1 to 1.")
	add("overlap over size", e.svc.UpdateSettings(ctx, e.user.ID, kb, rag.Settings{ChunkSize: "300", ChunkOverlap: "300"}),
		"Not saved: the overlap must be smaller than the chunk size.")
	add("an empty file", e.svc.AddFile(ctx, e.user.ID, kb, "../../empty.txt", strings.NewReader(""), 0), "empty.txt: the file is empty")
	add("a large file", e.svc.AddFile(ctx, e.user.ID, kb, "big.txt", strings.NewReader(strings.Repeat("a", 5<<10)), 0),
		"big.txt: larger than the limit of 4 KB a file")
	add("over the quota", e.svc.AddFile(ctx, e.user.ID, kb, "q.txt", strings.NewReader("some text"), 3), "q.txt: "+db.StorageLimitMessage(3))
	if err := e.svc.AddFile(ctx, e.user.ID, kb, "a.txt", strings.NewReader("some notes"), 0); err != nil {
		t.Fatalf("AddFile of a good file: %v", err)
	}
	add("the same content", e.svc.AddFile(ctx, e.user.ID, kb, "b.txt", strings.NewReader("some notes"), 0),
		"b.txt: the same content is already in this knowledge base (as a.txt)")
	_, _, err = e.svc.SearchKB(ctx, e.user.ID, kb, strings.Repeat("q", 2001), rag.Rewriter{})
	add("a long question", err, "The question is longer than 2,000 characters.")
	_, err = e.svc.ChangeModel(ctx, e.user.ID, kb, "")
	add("no new model", err, "Choose an embedding model.")
	for _, r := range refusals {
		if msg, ok := usererr.Message(r.err); !ok || msg != r.want {
			t.Errorf("%s: %q (%v), want %q", r.what, msg, r.err, r.want)
		}
	}
	if started, err := e.svc.ChangeModel(ctx, e.user.ID, kb, "EMBEDDER"); started || err != nil {
		t.Errorf("changing to the model in use: %v, %v; want nothing done", started, err)
	}
	if err := e.svc.RenameKB(ctx, e.user.ID, kb.ID+1000, "x"); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("renaming another's knowledge base: %v, want ErrNotFound", err)
	}
}
