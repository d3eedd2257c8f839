package agent

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"weft/db"
	"weft/rag"
)

// kbStore is a Store whose thread has one knowledge base attached; the
// search tool reads nothing else.
type kbStore struct{ Store }

func (kbStore) ThreadKBs(context.Context, int64, int64) ([]db.KnowledgeBase, error) {
	return []db.KnowledgeBase{{ID: 1, Name: "Docs"}}, nil
}

// failingSearch fails every search with err.
type failingSearch struct{ err error }

func (f failingSearch) Search(context.Context, rag.Query) ([]rag.Result, error) { return nil, f.err }

// searchTool runs the search_knowledge_base tool of an agent whose searches
// fail with err, as the loop does for the model.
func searchTool(t *testing.T, err error) error {
	t.Helper()
	a := New(kbStore{}, failingSearch{err}, nil, Config{DataDir: t.TempDir()})
	x := &run{a: a, r: db.Run{ID: 1, OwnerID: 2, ThreadID: 3}}
	env := &Env{Root: t.TempDir(), SearchKB: x.searchKB}
	_, runErr := a.byName[ToolSearchKB].Run(context.Background(), env, Args{"query": "ladders"})
	return runErr
}

func TestTheModelIsShownRagsOwnMessageWhenAKnowledgeBaseCannotBeSearched(t *testing.T) {
	msg := rag.ErrSearch.Error() + ": the embedding model “embedder” is not available on the Ollama server"
	// rag returns its SearchError by value, wrapped on its way up.
	err := searchTool(t, fmt.Errorf("search docs: %w", rag.SearchError{Msg: msg}))
	var te *ToolError
	if !errors.As(err, &te) {
		t.Fatalf("the search failure reaches the model as %T %v, not as a tool error with rag's message", err, err)
	}
	if te.Msg != msg {
		t.Errorf("the model is told %q, want rag's message %q", te.Msg, msg)
	}
}

func TestAnInternalSearchFailureIsNotShownToTheModel(t *testing.T) {
	err := searchTool(t, errors.New("pq: connection refused to 10.0.0.7"))
	var te *ToolError
	if errors.As(err, &te) {
		t.Errorf("an internal failure is shown to the model: %q", te.Msg)
	}
	if err == nil {
		t.Error("a failed search succeeds")
	}
}
