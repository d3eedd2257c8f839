package chat

import (
	"context"
	"sync/atomic"

	"github.com/ollama/ollama/api"

	"weft/db"
)

// AgentRunner executes agent runs (implemented by package agent): the tool
// loop, from the run's first step or from its last checkpoint.
type AgentRunner interface {
	RunAgent(ctx context.Context, h *AgentHost) AgentResult
}

// AgentResult is how an agent run ended.
type AgentResult struct {
	// Done: the model gave its final answer.
	Done bool
	// Detached: the run is waiting for the user and this instance is
	// shutting down; it stays waiting in the database, and whichever
	// instance runs next adopts it.
	Detached bool
	// Err is why the run failed (its usererr message, when it has one, is
	// shown as is).
	Err error
	// Evidence (rounds, changes, sources) and Usage are stored on the
	// answer's metadata.
	Evidence *db.Evidence
	Usage    db.Usage
}

// AgentHost is what the runtime lends an agent run: its identity, the
// context assembler, the model, and the live state its watchers see.
type AgentHost struct {
	Run db.Run
	rt  *Runtime
	lr  *liveRun
	// parent is the host of the run that delegated this one (a
	// sub-agent's host, from Child): its text stays its own, while its
	// steps, status and Stop are its parent's.
	parent *AgentHost
	waits  *atomic.Int32 // sub-agents of this run waiting for the user
	// historyFailed: summarizing the thread's history failed once in
	// this run; its later requests go out without trying again.
	historyFailed bool
	// room is a room run's profile (nil in a thread), shared with its
	// sub-agents; leaf is the last message its requests send (0: not
	// read yet).
	room *roomContext
	leaf int64
}

// Room is the profile of a room run (issue 20): its room, its agent (whose
// tool policy narrows the workspace's and whose knowledge bases are the
// ones searched) and the room's agents. nil for a thread's run. A
// sub-agent's is its parent's.
func (h *AgentHost) Room() *db.RoomProfile {
	if h == nil || h.room == nil {
		return nil
	}
	return &h.room.RoomProfile
}

// Child returns the host of a sub-agent's run r of this run. Its model
// requests go through the same runtime; its text is its own (never the
// parent's answer); a step it adds shows through the parent's watchers;
// the parent shows as waiting while any of its sub-agents waits; Stop of
// the parent stops it.
func (h *AgentHost) Child(r db.Run) *AgentHost {
	if h.waits == nil {
		h.waits = new(atomic.Int32)
	}
	msg := int64(0)
	if h.Run.AssistantMessageID != nil {
		msg = *h.Run.AssistantMessageID
	}
	r.AssistantMessageID = &msg // its live text is never saved as a message's
	return &AgentHost{Run: r, rt: h.rt, lr: newLiveRun(r, -1, realClock{}), parent: h, room: h.room}
}

// AssembleTask builds a sub-agent's request: the system prompt, role and
// memories like every route's, routeContext, and task as the one user
// message; none of the thread's turns.
func (h *AgentHost) AssembleTask(ctx context.Context, routeContext, task string) (Assembly, error) {
	a, err := h.rt.Assemble(ctx, ContextRequest{User: h.Run.OwnerID, Thread: h.Run.ThreadID, Model: h.Run.Model,
		RouteContext: routeContext, room: h.room})
	if err != nil {
		return a, err
	}
	a.Messages = append(a.Messages, api.Message{Role: db.RoleUser, Content: task})
	a.Estimate = estimateTokens(a.Messages, a.CharsPerToken)
	return a, nil
}

// Assemble builds the run's request (system prompt, role, summary, the
// route context, the path), like every route's; when the thread's history
// no longer fits, its older turns are first summarized into a compaction
// node, as before a chat answer (a failed summary is not tried again in
// this run: the request goes out without it).
func (h *AgentHost) Assemble(ctx context.Context, routeContext string) (Assembly, error) {
	if h.leaf == 0 {
		leaf, err := h.rt.roomLeaf(ctx, h.Run, h.room)
		if err != nil {
			return Assembly{}, err
		}
		h.leaf = leaf
	}
	req := ContextRequest{User: h.Run.OwnerID, Thread: h.Run.ThreadID,
		Leaf: h.leaf, Model: h.Run.Model, RouteContext: routeContext, room: h.room}
	a, err := h.rt.Assemble(ctx, req)
	if err != nil || h.historyFailed {
		return a, err
	}
	a, err = h.rt.compactHistory(ctx, h.lr, h.Run, req, a)
	h.historyFailed = a.CompactionFailed
	return a, err
}

// SummarizeRun writes an agent run's checkpoint with the thread
// compaction's summary machinery: lines are the transcript of the rounds
// summarized (one entry per message), prev the run's earlier checkpoint
// summary to merge, prompt the instructions, maxTokens the longest
// summary. The run shows "summarizing" meanwhile.
func (h *AgentHost) SummarizeRun(ctx context.Context, a Assembly, prompt string, maxTokens int, prev string, lines []string) (string, api.Metrics, error) {
	h.lr.setStatus(StatusCompacting)
	defer h.lr.setStatus(db.RunRunning)
	return h.rt.summarizeLines(ctx, summaryJob{Prompt: prompt, Heading: "Agent steps:", MaxTokens: maxTokens},
		a.Model, a.NumCtx, a.CharsPerToken, prev, lines)
}

// DescribeError is what the user is told about a failed model request
// (a summary that could not be written), without paths or internals.
func (h *AgentHost) DescribeError(err error, model string) string {
	return h.rt.describe(err, model)
}

// Chat sends one model request.
func (h *AgentHost) Chat(ctx context.Context, req *api.ChatRequest, fn api.ChatResponseFunc) error {
	return h.rt.llm.Chat(ctx, req, fn)
}

// SupportsTools reports whether the model can call tools (known is false
// when the model server does not list it).
func (h *AgentHost) SupportsTools(ctx context.Context, model string) (has, known bool) {
	return h.rt.models.Supports(ctx, model, "tools")
}

// Append streams answer (or thinking) text of the current round.
func (h *AgentHost) Append(thinking bool, text string) {
	if thinking {
		h.lr.append(EventThinking, text)
	} else {
		h.lr.append(EventDelta, text)
	}
}

// NewRound clears the streamed text: the previous round's text now lives
// in its step.
func (h *AgentHost) NewRound() { h.lr.reset() }

// Text is the current round's text.
func (h *AgentHost) Text() (content, thinking string) { return h.lr.text() }

// Stepped tells watchers that a step was added or changed.
func (h *AgentHost) Stepped() {
	if h.parent != nil {
		h.parent.Stepped()
		return
	}
	h.lr.stepped()
}

// SetStatus publishes the run's shown status (running, waiting). A
// sub-agent's parent shows waiting while any of its sub-agents waits.
func (h *AgentHost) SetStatus(status string) {
	if p := h.parent; p != nil {
		switch status {
		case db.RunWaiting:
			if p.waits.Add(1) == 1 {
				p.SetStatus(db.RunWaiting)
			}
		default:
			if p.waits.Add(-1) == 0 {
				p.SetStatus(db.RunRunning)
			}
		}
		return
	}
	h.lr.setStatus(status)
}

// Stream returns the receiver of one streamed model request of the run:
// its text goes to the run's watchers and is flushed as it comes, like
// every route's; each sees every response (tool calls).
func (h *AgentHost) Stream(ctx context.Context, each func(api.ChatResponse)) *Stream {
	return h.rt.stream(ctx, h.lr, false, each)
}

// StopUser stops the run as if its user pressed Stop (a stop requested on
// another instance).
func (h *AgentHost) StopUser() {
	if h.parent != nil {
		h.parent.StopUser()
		return
	}
	h.lr.stop(StopUser)
}

// StopReason is StopUser, StopShutdown or "" (not stopped).
func (h *AgentHost) StopReason() string {
	if h.parent != nil {
		return h.parent.StopReason()
	}
	return h.lr.reason()
}

// EstimateTokens estimates the prompt tokens of msgs with the assembly's
// calibration (the same estimate the assembler uses).
func (h *AgentHost) EstimateTokens(a Assembly, msgs []api.Message) int {
	return estimateTokens(msgs, a.CharsPerToken)
}
