package chat

import (
	"context"
	"log/slog"
	"time"

	"github.com/ollama/ollama/api"
)

// Stream receives a run's streamed model answer, for every route: thinking
// and answer text go to the live run (its watchers see them at once), and
// the text so far is flushed to the database every FlushEvery (a stop
// requested on another instance is noticed there). Done and Final are set
// when the model finished: Final is its last response, with the metrics.
type Stream struct {
	Done  bool
	Final api.ChatResponse

	ctx       context.Context
	rt        *Runtime
	lr        *liveRun
	atAnswer  bool                   // also flush when the answer begins after thinking
	each      func(api.ChatResponse) // sees every response after its text is appended
	lastFlush time.Time
	thinking  bool // the last text was thinking
}

// stream returns the Stream of a model request of lr. atAnswer flushes the
// thinking as soon as the answer begins (chat: a reload then shows all of
// it); each, if set, sees every response (the agent collects tool calls).
func (rt *Runtime) stream(ctx context.Context, lr *liveRun, atAnswer bool, each func(api.ChatResponse)) *Stream {
	return &Stream{ctx: ctx, rt: rt, lr: lr, atAnswer: atAnswer, each: each, lastFlush: time.Now()}
}

// Receive is the api.ChatResponseFunc of the request.
func (s *Stream) Receive(resp api.ChatResponse) error {
	boundary := false
	if t := resp.Message.Thinking; t != "" {
		s.lr.append(EventThinking, t)
		s.thinking = true
	}
	if c := resp.Message.Content; c != "" {
		boundary = s.thinking && s.atAnswer
		s.thinking = false
		s.lr.append(EventDelta, c)
	}
	if s.each != nil {
		s.each(resp)
	}
	if resp.Done {
		s.Done, s.Final = true, resp
		return nil
	}
	if boundary || time.Since(s.lastFlush) >= s.rt.cfg.FlushEvery {
		s.lastFlush = time.Now()
		s.rt.flush(s.ctx, s.lr)
	}
	return nil
}

// flush saves the partial answer; a stop requested through the database
// (from another instance) cancels the run here.
func (rt *Runtime) flush(ctx context.Context, lr *liveRun) {
	content, thinking := lr.text()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	stop, err := rt.store.FlushAnswer(wctx, lr.id, lr.msgID, content, thinking)
	if err != nil {
		slog.Warn("flush answer", "run", lr.id, "err", err)
		return
	}
	if stop {
		lr.stop(StopUser)
	}
}
