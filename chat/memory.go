package chat

import "context"

// MemoryReader is the part of a Store that reads the user's memories
// (issue 17). A Store without it (a test double) sends none.
type MemoryReader interface {
	MemoryOverview(ctx context.Context, user, thread int64) (string, error)
}

// memoryOverview is the short overview of the user's memories that goes
// in the system message of every request of the thread, on every route;
// it is assembled per request and never stored. "" in a temporary thread.
func (rt *Runtime) memoryOverview(ctx context.Context, user, thread int64) (string, error) {
	m, ok := rt.store.(MemoryReader)
	if !ok || user == 0 || thread == 0 {
		return "", nil
	}
	return m.MemoryOverview(ctx, user, thread)
}
