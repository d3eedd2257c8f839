package chat

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ollama/ollama/api"

	"weft/db"
)

const titlePrompt = "You write titles. Reply with a short title (at most six words) for the conversation below, " +
	"in the language of the conversation. Reply with the title only: no quotes, no punctuation at the end."

// generateTitle asks the thread's model for a short title after the first
// answer and stores it, unless the user renamed the thread meanwhile. A
// failure leaves the provisional title; it is never shown as an error.
func (rt *Runtime) generateTitle(owner, thread int64, model, question, answer string) {
	ctx, cancel := context.WithTimeout(rt.ctx, 90*time.Second)
	defer cancel()
	if utf8.RuneCountInString(answer) > 2000 {
		answer = string([]rune(answer)[:2000])
	}
	req := &api.ChatRequest{
		Model:  model,
		Stream: ptr(false),
		Messages: []api.Message{
			{Role: db.RoleSystem, Content: titlePrompt},
			{Role: db.RoleUser, Content: question},
			{Role: db.RoleAssistant, Content: answer},
			{Role: db.RoleUser, Content: "Write the title of this conversation."},
		},
		Options: map[string]any{"num_ctx": rt.models.NumCtx(ctx, model), "num_predict": 32},
	}
	var out strings.Builder
	err := rt.llm.Chat(ctx, req, func(resp api.ChatResponse) error {
		out.WriteString(resp.Message.Content)
		return nil
	})
	if err != nil {
		slog.Warn("title generation", "thread", thread, "err", err)
		return
	}
	title := cleanTitle(out.String())
	if title == "" {
		return
	}
	changed, err := rt.store.SetGeneratedTitle(ctx, owner, thread, title)
	if err != nil {
		slog.Warn("store title", "thread", thread, "err", err)
		return
	}
	if changed {
		rt.titleChanged(thread)
	}
}

// cleanTitle keeps the first line of a model's title, without a "Title:"
// label, quotes, markdown emphasis or a final full stop, at most 80 runes.
func cleanTitle(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "</think>"); i >= 0 {
		s = strings.TrimSpace(s[i+len("</think>"):])
	}
	s, _, _ = strings.Cut(s, "\n")
	if k, v, ok := strings.Cut(s, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "title") {
		s = v
	}
	s = strings.Trim(strings.TrimSpace(s), "\"'`*#“”‘’ ")
	s = strings.TrimRight(s, ".")
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > 80 {
		s = strings.TrimSpace(string([]rune(s)[:79])) + "…"
	}
	return s
}

// titleWait is the channel the waiters of one thread share, with how many
// are waiting, so that the last to leave removes it.
type titleWait struct {
	ch      chan struct{}
	waiters int
}

// TitleChanged returns a channel closed the next time a generated title is
// stored for the thread (on this instance), and a release function the
// waiter must call when it stops waiting. The caller authorizes the thread
// first: a waiter is memory held until release.
func (rt *Runtime) TitleChanged(thread int64) (<-chan struct{}, func()) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	w, ok := rt.titles[thread]
	if !ok {
		w = &titleWait{ch: make(chan struct{})}
		rt.titles[thread] = w
	}
	w.waiters++
	var once sync.Once
	return w.ch, func() {
		once.Do(func() {
			rt.mu.Lock()
			defer rt.mu.Unlock()
			w.waiters--
			if w.waiters == 0 && rt.titles[thread] == w {
				delete(rt.titles, thread)
			}
		})
	}
}

// TitleWaiters counts the threads with someone waiting for a title (a test
// hook: it must fall back to zero when the waiters leave).
func (rt *Runtime) TitleWaiters() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.titles)
}

func (rt *Runtime) titleChanged(thread int64) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if w, ok := rt.titles[thread]; ok {
		close(w.ch)
		delete(rt.titles, thread)
	}
}
