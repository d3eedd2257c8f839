package fakeollama

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
)

func TestWaitForReturnsOnceTheRecordsSatisfyTheCondition(t *testing.T) {
	s := New(t)
	c := client(t, s)
	done := make(chan error, 1)
	go func() {
		done <- c.Chat(context.Background(), &api.ChatRequest{Model: "tiny", Messages: user("[[tokens:3]]")}, func(api.ChatResponse) error { return nil })
	}()
	err := s.WaitFor(ctxT(t), func(recs []Recorded) bool { return len(recs) == 1 && recs[0].Completed })
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Requests(); len(r) != 1 || !r[0].Completed || r[0].ChunksSent < 4 {
		t.Fatalf("WaitFor returned before the reply was complete: %+v", r)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestWaitForGivesUpWhenTheContextEnds(t *testing.T) {
	s := New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := s.WaitFor(ctx, func(recs []Recorded) bool { return len(recs) > 0 })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor with no request = %v, want the context's deadline", err)
	}
}
