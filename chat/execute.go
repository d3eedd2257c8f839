package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/internal/usererr"
)

// execute runs one chat run to its end.
func (rt *Runtime) execute(ctx context.Context, lr *liveRun, r db.Run) {
	started := time.Now()
	room, err := rt.roomOf(ctx, r)
	if err != nil {
		rt.settle(ctx, lr, r, db.Finish{}, ending{err: err, model: r.Model, started: started,
			logAs: "room run failed", logged: func(err error) bool { return !usererr.Is(err) }})
		return
	}
	if r.Kind == db.RouteAgent {
		rt.executeAgent(ctx, lr, r, room)
		return
	}
	var fin db.Finish
	st := rt.stream(ctx, lr, true, nil)

	a, thread, chatErr := rt.prepare(ctx, lr, r, room)
	model := a.Model
	if chatErr == nil && model == "" && a.Direct == "" {
		chatErr = ErrNoModel
	}
	if chatErr == nil && a.Direct != "" {
		// Answered without the model (nothing relevant in the knowledge base).
		lr.append(EventDelta, a.Direct)
		st.Done = true
		fin.Meta.NothingFound = true
	} else if chatErr == nil {
		req := &api.ChatRequest{
			Model:    model,
			Messages: a.Messages,
			Stream:   ptr(true),
			Options:  a.Options,
		}
		fin.Usage.NumCtx, fin.Usage.EstimatedPromptTokens = a.NumCtx, a.Estimate
		if a.Compacted != nil {
			fin.Usage.CompactionID = a.Compacted.ID
		}
		fin.Usage.CompactionFailed = a.CompactionFailed
		chatErr = modelFailure(rt.llm.Chat(ctx, req, st.Receive))
	}

	fin.Content, fin.Thinking = lr.text()
	if a.RAGSources != nil {
		fin.Meta.Sources = markCited(a.RAGSources, fin.Content)
	}
	if st.Done {
		rt.answered(ctx, &fin.Usage, a, st.Final)
		rt.handOn(ctx, r, room, fin.Content)
	}
	rt.settle(ctx, lr, r, fin, ending{
		done: st.Done, err: chatErr, model: model, started: started,
		interrupted: "The server stopped while this answer was being written.",
		logAs:       "run failed",
		logged:      func(err error) bool { return !errors.Is(err, ErrNoModel) },
	})

	if room != nil {
		return // a room's name is its title
	}
	// A title comes from the thread's first exchange only: a later answer
	// that finishes while that title is still being written must not
	// replace it with one about its own question.
	if st.Done && thread.TitleState == db.TitleProvisional && len(a.Turns) > 0 && firstQuestion(a.Turns) {
		question := lastUserText(a.Turns)
		rt.wg.Add(1)
		go func() {
			defer rt.wg.Done()
			rt.generateTitle(r.OwnerID, thread.ID, model, question, fin.Content)
		}()
	}
}

// answered records the usage of a complete answer: the model server's
// counts and timings, and how full the context window was.
func (rt *Runtime) answered(ctx context.Context, u *db.Usage, a Assembly, final api.ChatResponse) {
	m := final.Metrics
	u.Counted = true
	u.PromptTokens, u.OutputTokens = m.PromptEvalCount, m.EvalCount
	u.DurationMS = m.TotalDuration.Milliseconds()
	if m.EvalDuration > 0 {
		u.TokensPerSecond = float64(m.EvalCount) / m.EvalDuration.Seconds()
	}
	u.DoneReason = final.DoneReason
	if a.NumCtx > 0 {
		u.ContextFill = float64(m.PromptEvalCount+m.EvalCount) / float64(a.NumCtx)
	}
	if rt.observe(a, m.PromptEvalCount) {
		u.Truncated = true
	}
}

// executeAgent runs an agent run through the AgentRunner and settles it
// like every other run; a run left waiting for its user at shutdown is not
// settled: it stays waiting for the next instance.
func (rt *Runtime) executeAgent(ctx context.Context, lr *liveRun, r db.Run, room *roomContext) {
	started := time.Now()
	h := &AgentHost{Run: r, rt: rt, lr: lr, room: room}
	var res AgentResult
	if rt.cfg.Agent == nil {
		res.Err = usererr.New("The agent is not available on this server.")
	} else {
		res = rt.cfg.Agent.RunAgent(ctx, h)
	}
	if res.Detached {
		rt.progress.flushNow(lr) // the adopting instance reads it
		lr.end(db.Message{ID: lr.msgID, ThreadID: r.ThreadID, Role: db.RoleAssistant, Status: db.MsgStreaming})
		rt.mu.Lock()
		delete(rt.live, r.ID)
		rt.mu.Unlock()
		return
	}
	fin := db.Finish{Usage: res.Usage, Meta: db.MessageMeta{Evidence: res.Evidence}}
	fin.Content, fin.Thinking = lr.text()
	if res.Done {
		rt.handOn(ctx, r, room, fin.Content)
	}
	interrupted := "The server stopped while the agent was working. Resume it from its last step."
	if room != nil {
		interrupted = "The server stopped while the agent was working." // a room has no Resume
	}
	rt.settle(ctx, lr, r, fin, ending{
		done: res.Done, err: res.Err, model: r.Model, started: started,
		interrupted: interrupted,
		logAs:       "agent run failed",
		logged:      func(err error) bool { return !usererr.Is(err) },
	})
	if res.Done && room == nil {
		rt.titleAgentThread(ctx, r, fin.Content)
	}
}

// titleAgentThread gives an agent thread a generated title after its
// first answer, as a chat thread gets one: from the first question (the
// run's user message when it is the thread's first) and the answer.
func (rt *Runtime) titleAgentThread(ctx context.Context, r db.Run, answer string) {
	if r.UserMessageID == nil || strings.TrimSpace(answer) == "" {
		return
	}
	thread, err := rt.store.Thread(ctx, r.OwnerID, r.ThreadID)
	if err != nil || thread.TitleState != db.TitleProvisional {
		return
	}
	q, err := rt.store.Message(ctx, r.OwnerID, *r.UserMessageID)
	if err != nil || q.ParentID != nil {
		return
	}
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		rt.generateTitle(r.OwnerID, thread.ID, r.Model, q.Content, answer)
	}()
}

// prepare assembles the run's request, summarizing older turns first when
// they no longer fit (the run shows "summarizing" meanwhile). A failed
// summary is logged and the request goes out without it: Ollama then
// truncates, and the answer says so.
func (rt *Runtime) prepare(ctx context.Context, lr *liveRun, r db.Run, room *roomContext) (Assembly, db.Thread, error) {
	leaf, err := rt.roomLeaf(ctx, r, room)
	if err != nil {
		return Assembly{}, db.Thread{}, err
	}
	req := ContextRequest{User: r.OwnerID, Thread: r.ThreadID, Leaf: leaf, Model: r.Model, room: room}
	if r.Continues {
		// The answer so far is the model's own beginning: it goes on from it.
		partial, err := rt.store.Message(ctx, r.OwnerID, lr.msgID)
		if err != nil {
			return Assembly{}, db.Thread{}, fmt.Errorf("load answer: %w", err)
		}
		req.Partial = &partial
	}
	var sources []db.Source
	if r.Kind == db.RouteRAG {
		g, err := rt.retrieve(ctx, lr, r, req.Partial, room)
		if err != nil {
			return Assembly{}, db.Thread{}, err
		}
		if g.direct != "" {
			a := Assembly{Direct: g.direct}
			a.Sources.Thread, err = rt.store.Thread(ctx, r.OwnerID, r.ThreadID)
			return a, a.Sources.Thread, err
		}
		if g.on() {
			sources = g.sources
			req.RouteContext = ragContext(g.kbs, g.web, sources)
		}
	}
	a, err := rt.Assemble(ctx, req)
	if err != nil {
		return a, a.Sources.Thread, err
	}
	a, err = rt.compactHistory(ctx, lr, r, req, a)
	a.RAGSources = sources
	return a, a.Sources.Thread, err
}

// compactHistory summarizes a's older turns into a compaction node when
// they no longer fit (needsCompaction) and assembles req again over the
// summary; the run shows "summarizing" meanwhile. Every route sends its
// thread's history through it (the agent's before each of its requests).
// A failed summary is logged and a goes out without it, CompactionFailed
// set: Ollama then truncates, and the answer says so.
func (rt *Runtime) compactHistory(ctx context.Context, lr *liveRun, r db.Run, req ContextRequest, a Assembly) (Assembly, error) {
	ratio := rt.cfg.CompactAt
	if req.room != nil {
		ratio = float64(req.room.Room.SummarizeAt) / 100 // the room's setting
	}
	if a.Model == "" || !a.needsCompaction(ratio) {
		return a, nil
	}
	turns := a.Turns
	if req.Partial != nil {
		turns = turns[:len(turns)-1]
	}
	share := keepShare
	if req.room != nil {
		// After a room's summary the request fills at most half its
		// threshold, so that the next messages do not summarize again.
		share = min(keepShare, ratio/2)
	}
	keep := int(float64(a.Budget)*share) - a.SystemTokens
	covered := splitForCompaction(turns, keep, a.CharsPerToken)
	if req.room != nil {
		// The room's recent messages are always kept word for word.
		covered = min(covered, len(turns)-req.room.Room.KeepRecent)
	}
	if covered <= 0 {
		return a, nil
	}
	lr.setStatus(StatusCompacting)
	defer lr.setStatus(db.RunRunning)
	node, err := rt.compactFor(ctx, r.OwnerID, a, covered, true)
	if err != nil {
		if ctx.Err() != nil {
			return a, ctx.Err()
		}
		slog.Warn("automatic compaction", "run", r.ID, "err", err)
		a.CompactionFailed = true
		return a, nil
	}
	b, err := rt.Assemble(ctx, req)
	b.Compacted = &node
	return b, err
}

// firstQuestion reports whether the message answered is the thread's first
// (a root of the tree).
func firstQuestion(turns []db.Message) bool {
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].Role == db.RoleUser {
			return turns[i].ParentID == nil
		}
	}
	return false
}

// lastUserText is the text of the last user message of turns.
func lastUserText(turns []db.Message) string {
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].Role == db.RoleUser {
			return turns[i].Content
		}
	}
	return ""
}
