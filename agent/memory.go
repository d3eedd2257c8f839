// Memory: the remember and forget tools keep facts about the user across
// conversations (issue 17). What the model remembers is shown to it in
// every request's system message (chat.Runtime.Assemble adds the
// overview, on every route), never stored as a message; the user sees,
// edits and deletes every memory on /memory.

package agent

import (
	"context"
	"errors"
	"fmt"

	"weft/db"
)

// Memory tools' names.
const (
	ToolRemember = "remember"
	ToolForget   = "forget"
)

// MemoryStore is what the memory tools need from the database.
type MemoryStore interface {
	AddMemory(ctx context.Context, user int64, in db.MemoryInput) (db.Memory, error)
	DeleteMemory(ctx context.Context, user, id int64) error
	ForgetMemory(ctx context.Context, user int64, fact string) (db.Memory, error)
}

// Memory provides the remember and forget tools. Both are ClassRead
// (auto by default, as other agent runtimes keep memories without asking):
// they change nothing in the workspace, only the user's own memories,
// which the user sees and can undo on /memory. A workspace's rules can
// still set either to ask or off.
type Memory struct{ store MemoryStore }

// NewMemory returns the memory tools over store.
func NewMemory(store MemoryStore) *Memory { return &Memory{store: store} }

// Tools lists remember and forget.
func (m *Memory) Tools() []Tool {
	return []Tool{{
		Name: ToolRemember,
		Description: fmt.Sprintf("Remember a lasting fact about the user (a preference, their name, their setup) for later "+
			"conversations; one short fact, at most %d characters. Do not remember secrets or passing details.", db.MaxMemoryChars),
		Class:  ClassRead,
		Origin: "Memory",
		Params: []Param{{Name: "fact", Type: "string", Description: "The fact, as a short sentence", Required: true}},
		Run:    m.remember,
	}, {
		Name:        ToolForget,
		Description: "Forget a remembered fact: by its id (the number in brackets in the memory list) or by its text.",
		Class:       ClassRead,
		Origin:      "Memory",
		Params: []Param{
			{Name: "id", Type: "integer", Description: "The memory's id"},
			{Name: "fact", Type: "string", Description: "The memory's text, when the id is not known"},
		},
		Run: m.forget,
	}}
}

func (m *Memory) remember(ctx context.Context, env *Env, args Args) (Result, error) {
	fact, err := args.String("fact", true)
	if err != nil {
		return Result{}, err
	}
	if _, err := db.NormalizeFact(fact); err != nil {
		return Result{}, Errorf("%s", err.Error())
	}
	mem, err := m.store.AddMemory(ctx, env.User, db.MemoryInput{Fact: fact, Source: db.MemoryAgent, Thread: env.Thread, Run: env.Run})
	switch {
	case errors.Is(err, db.ErrMemoryTemporary):
		return Result{}, Errorf("this conversation is temporary: nothing is remembered from it")
	case errors.Is(err, db.ErrMemoryFull):
		return Result{}, Errorf("memory is full (%d facts): forget one first", db.MaxMemories)
	case err != nil:
		return Result{}, err
	}
	return Result{Output: fmt.Sprintf("Remembered [%d] %s", mem.ID, mem.Fact)}, nil
}

func (m *Memory) forget(ctx context.Context, env *Env, args Args) (Result, error) {
	id, err := args.Int("id", 0)
	if err != nil {
		return Result{}, err
	}
	fact, err := args.String("fact", false)
	if err != nil {
		return Result{}, err
	}
	if id != 0 {
		if err := m.store.DeleteMemory(ctx, env.User, int64(id)); errors.Is(err, db.ErrNotFound) {
			return Result{}, Errorf("there is no memory %d", id)
		} else if err != nil {
			return Result{}, err
		}
		return Result{Output: fmt.Sprintf("Forgot memory %d", id)}, nil
	}
	if fact == "" {
		return Result{}, Errorf("give the memory's id or its text")
	}
	mem, err := m.store.ForgetMemory(ctx, env.User, fact)
	if errors.Is(err, db.ErrNotFound) {
		return Result{}, Errorf("no single memory says %q: give its id", fact)
	} else if err != nil {
		return Result{}, err
	}
	return Result{Output: fmt.Sprintf("Forgot [%d] %s", mem.ID, mem.Fact)}, nil
}
