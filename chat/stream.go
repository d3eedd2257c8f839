package chat

import (
	"context"

	"github.com/ollama/ollama/api"
)

// Stream receives a run's streamed model answer, for every route: thinking
// and answer text go to the live run (its watchers see them at once, tokens
// that arrive within MergeWindow merged into one event), and the runtime's
// progress writer saves the new text every FlushEvery, off this path (a
// stop requested on another instance is noticed there). Done and Final are
// set when the model finished: Final is its last response, with the
// metrics.
type Stream struct {
	Done  bool
	Final api.ChatResponse

	ctx      context.Context
	rt       *Runtime
	lr       *liveRun
	atAnswer bool                   // also save when the answer begins after thinking
	each     func(api.ChatResponse) // sees every response after its text is appended
	thinking bool                   // the last text was thinking
}

// stream returns the Stream of a model request of lr. atAnswer saves the
// thinking as soon as the answer begins (chat: a reload then shows all of
// it); each, if set, sees every response (the agent collects tool calls).
func (rt *Runtime) stream(ctx context.Context, lr *liveRun, atAnswer bool, each func(api.ChatResponse)) *Stream {
	return &Stream{ctx: ctx, rt: rt, lr: lr, atAnswer: atAnswer, each: each}
}

// Receive is the api.ChatResponseFunc of the request. It never waits for
// the database.
func (s *Stream) Receive(resp api.ChatResponse) error {
	if t := resp.Message.Thinking; t != "" {
		s.lr.append(EventThinking, t)
		s.thinking = true
	}
	if c := resp.Message.Content; c != "" {
		boundary := s.thinking && s.atAnswer
		s.thinking = false
		s.lr.append(EventDelta, c)
		if boundary {
			s.rt.progress.wake()
		}
	}
	if s.each != nil {
		s.each(resp)
	}
	if resp.Done {
		s.Done, s.Final = true, resp
	}
	return nil
}
