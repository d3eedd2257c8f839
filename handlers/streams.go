package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"
)

const msgTooManyStreams = "Too many live views are open for your account. Close some tabs and reload."

// streamRegistry holds the open event streams of this instance: how many
// each user has (capped, so that one account cannot hold every connection
// and goroutine of the server) and which session opened each, so that
// logging out ends them.
type streamRegistry struct {
	max int

	mu        sync.Mutex
	perUser   map[int64]int
	bySession map[string]map[*openStream]struct{}
}

type openStream struct {
	user    int64
	session string
	cancel  context.CancelFunc
}

func newStreamRegistry(max int) *streamRegistry {
	return &streamRegistry{max: max, perUser: map[int64]int{}, bySession: map[string]map[*openStream]struct{}{}}
}

// open takes one of the user's stream slots. The returned context ends when
// the request does or when the session is ended; release frees the slot. ok
// is false when the user already holds the maximum.
func (s *streamRegistry) open(ctx context.Context, user int64, session string) (_ context.Context, release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perUser[user] >= s.max {
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(ctx)
	o := &openStream{user: user, session: session, cancel: cancel}
	s.perUser[user]++
	if s.bySession[session] == nil {
		s.bySession[session] = map[*openStream]struct{}{}
	}
	s.bySession[session][o] = struct{}{}
	var once sync.Once
	return ctx, func() { once.Do(func() { s.close(o) }) }, true
}

func (s *streamRegistry) close(o *openStream) {
	o.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perUser[o.user]--; s.perUser[o.user] <= 0 {
		delete(s.perUser, o.user)
	}
	if set := s.bySession[o.session]; set != nil {
		delete(set, o)
		if len(set) == 0 {
			delete(s.bySession, o.session)
		}
	}
}

// endSession ends every stream opened under the session token (logout, or
// a session destroyed because its account was disabled).
func (s *streamRegistry) endSession(session string) {
	if session == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for o := range s.bySession[session] {
		o.cancel()
	}
}

// sessions lists the session tokens with open streams (for the sweep that
// ends streams whose session was destroyed on another instance).
func (s *streamRegistry) sessions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.bySession))
	for tok := range s.bySession {
		out = append(out, tok)
	}
	return out
}

func (s *streamRegistry) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.perUser {
		n += c
	}
	return n
}

// sweep ends, every interval until stop closes, the streams whose session
// no longer exists: destroyed by a logout on another instance, or expired.
func (s *streamRegistry) sweep(live func(ctx context.Context, tokens []string) ([]string, error), every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		tokens := s.sessions()
		if len(tokens) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		alive, err := live(ctx, tokens)
		cancel()
		if err != nil {
			slog.Warn("stream session sweep", "err", err)
			continue
		}
		for _, tok := range tokens {
			if !slices.Contains(alive, tok) {
				s.endSession(tok)
			}
		}
	}
}

// streamHeartbeat: a long-lived stream with nothing to say sends a comment
// this often, so that proxies keep it open.
const streamHeartbeat = 15 * time.Second

// watchLoop is the loop of a stream that shows a thread as it changes (a
// room's, a thread page's live watch): refresh reads and sends what
// changed, at once, then at every note about thread (from any instance),
// every poke, and at least every interval should a note be lost; a
// heartbeat comment keeps the connection. It returns when refresh says
// false, a heartbeat cannot be written or ctx ends. The watch starts before
// the first read, so a change between the two is not missed.
func watchLoop(ctx context.Context, watch func(thread int64) (<-chan struct{}, func()), thread int64, every time.Duration,
	poke <-chan struct{}, out *muxStream, refresh func() bool) {
	noted, unwatch := watch(thread)
	defer unwatch()
	recheck := time.NewTicker(every)
	defer recheck.Stop()
	beat := time.NewTicker(streamHeartbeat)
	defer beat.Stop()
	for {
		if !refresh() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-noted:
		case <-poke:
		case <-recheck.C:
		case <-beat.C:
			if out.comment() != nil {
				return
			}
		}
	}
}

// openUserStream opens a signed-in user's event stream: counted against
// their open streams (past the cap a 429, answered here), framed by
// eventStream, and its context ended at shutdown as well as when the
// browser leaves. done releases it; ok is false when nothing was opened.
func openUserStream(w http.ResponseWriter, r *http.Request, user int64, reg *streamRegistry,
	sessions interface{ Token(context.Context) string }, closing <-chan struct{}) (ctx context.Context, es *eventStream, done func(), ok bool) {
	ctx, release, ok := reg.open(r.Context(), user, sessions.Token(r.Context()))
	if !ok {
		w.Header().Set("Retry-After", "30")
		errorPage(w, r, http.StatusTooManyRequests, msgTooManyStreams)
		return nil, nil, nil, false
	}
	es, err := startEventStream(w)
	if err != nil {
		release()
		return nil, nil, nil, false
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, es, func() { cancel(); release() }, true
}
