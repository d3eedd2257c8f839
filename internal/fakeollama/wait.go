package fakeollama

import "context"

// WaitFor blocks until cond holds for the chat requests recorded so far,
// or ctx ends (then it returns ctx.Err()). cond is checked at once and
// again whenever a record changes (a request arrives, sends a line,
// ends), so a test waits on what the fake saw instead of sleeping. It is
// called with the fake's lock held: it must not keep or modify the
// records, nor call the Server.
func (s *Server) WaitFor(ctx context.Context, cond func(recs []Recorded) bool) error {
	return s.wait(ctx, func() bool { return cond(s.records) })
}
