package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/internal/usererr"
	"weft/rag"
)

// checkpoint is the loop's state after a step: a resumed run goes on from
// here.
type checkpoint struct {
	Round    int             `json:"round"`
	Messages []api.Message   `json:"messages"` // the run's own turns after the assembled context
	Pending  []pendingCall   `json:"pending,omitempty"`
	Seen     map[string]int  `json:"seen,omitempty"` // call signature → times called
	Changes  []db.FileChange `json:"changes,omitempty"`
	Sources  []db.StepSource `json:"sources,omitempty"`
	Usage    *tokens         `json:"usage,omitempty"` // nil until a model turn finished
	Final    *finalAnswer    `json:"final,omitempty"`
	// Delegated counts the tasks this run delegated (bounded per run).
	Delegated int `json:"delegated,omitempty"`
	// Checkpoint is the summary of the older rounds that Messages[0]
	// stands for (compact.go); CompactFailed the round whose summary
	// could not be written.
	Checkpoint    *runCheckpoint `json:"checkpoint,omitempty"`
	CompactFailed int            `json:"compact_failed,omitempty"`
}

// tokens are the run's token counts over its model turns.
type tokens struct {
	Prompt int `json:"prompt_tokens"`
	Output int `json:"output_tokens"`
}

// load reads the thread, workspace and checkpoint, and prepares the
// workspace folder.
func (x *run) load(ctx context.Context) error {
	var err error
	if x.thread, err = x.a.store.Thread(ctx, x.r.OwnerID, x.r.ThreadID); err != nil {
		return fmt.Errorf("load thread: %w", err)
	}
	if x.ws, err = x.a.store.Workspace(ctx, x.r.OwnerID, x.thread.WorkspaceID); err != nil {
		return fmt.Errorf("load workspace: %w", err)
	}
	x.max = x.ws.AgentMaxSteps
	if x.max <= 0 {
		x.max = 25
	}
	if x.sub != nil {
		x.max = x.sub.MaxRounds // its budget (at most its parent's limit)
	}
	root := x.a.Root(x.ws)
	if err := os.MkdirAll(root, 0o750); err != nil {
		slog.Error("create workspace folder", "workspace", x.ws.ID, "err", err)
		return usererr.New("The workspace folder could not be created on the server. Ask the administrator to check WEFT_DATA_DIR.")
	}
	x.env = &Env{Root: root, User: x.r.OwnerID, Thread: x.r.ThreadID, Workspace: x.ws.ID, Run: x.r.ID, Fetch: x.a.fetch, run: x}
	if room := x.h.Room(); room != nil {
		x.env.Narrow = room.Agent.ToolPolicy
	}
	if x.a.search != nil {
		x.env.SearchKB = x.searchKB
	}
	raw, err := x.a.store.Checkpoint(ctx, x.r.ID)
	if err != nil {
		return fmt.Errorf("load checkpoint: %w", err)
	}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &x.cp); err != nil {
			return fmt.Errorf("decode checkpoint: %w", err)
		}
	}
	if x.cp.Seen == nil {
		x.cp.Seen = map[string]int{}
	}
	return nil
}

// searchKB searches the thread's knowledge bases as the run's user (a
// room agent's: its own).
func (x *run) searchKB(ctx context.Context, query string, topK int) ([]KBHit, error) {
	var kbs []db.KnowledgeBase
	if room := x.h.Room(); room != nil {
		if kbs = room.KBs; len(kbs) == 0 {
			return nil, Errorf("this agent of the room has no knowledge base")
		}
	} else {
		var err error
		if kbs, err = x.a.store.ThreadKBs(ctx, x.r.OwnerID, x.r.ThreadID); err != nil {
			return nil, err
		}
	}
	if len(kbs) == 0 {
		return nil, Errorf("no knowledge base is attached to this thread")
	}
	res, err := x.a.search.Search(ctx, rag.Query{User: x.r.OwnerID, KBs: kbs, Text: query, TopK: topK})
	if err != nil {
		if msg, ok := usererr.Message(err); ok {
			return nil, Errorf("%s", msg)
		}
		return nil, err
	}
	var out []KBHit
	for _, r := range res {
		if !r.Relevant {
			continue
		}
		out = append(out, KBHit{DocumentID: r.DocumentID, ChunkID: r.ChunkID, Document: r.Document,
			Headings: r.Headings, Page: r.Page, Text: r.Text, Score: r.Fused})
	}
	return out, nil
}

// addStep records a new step with the checkpoint.
func (x *run) addStep(ctx context.Context, kind, status string, data db.StepData) (db.Step, error) {
	return x.addStepAs(ctx, kind, status, data, nil)
}

// addStepAs records a new step; set stores its id in the checkpoint saved
// with it, in the same transaction, so that a resumed run finds the step
// instead of making another.
func (x *run) addStepAs(ctx context.Context, kind, status string, data db.StepData, set func(id int64)) (db.Step, error) {
	data.Round = x.cp.Round
	var cp any = x.cp
	if set != nil {
		cp = db.StepCheckpoint(func(s db.Step) any {
			set(s.ID)
			return x.cp
		})
	}
	s, err := x.a.store.AddStep(context.WithoutCancel(ctx), x.r.ID, kind, status, data, cp)
	if err != nil {
		if set != nil {
			set(0)
		}
		return s, err
	}
	x.h.Stepped()
	return s, nil
}

// saveCheckpoint saves the checkpoint with a step left as it is.
func (x *run) saveCheckpoint(ctx context.Context, s db.Step) error {
	_, err := x.a.store.UpdateStep(context.WithoutCancel(ctx), s.ID, s.Status, s.Data, x.cp)
	return err
}

func (x *run) updateStep(ctx context.Context, s db.Step, status string, data db.StepData) (db.Step, error) {
	return x.updateStepWith(ctx, s, status, data, nil)
}

// updateStepWith is updateStep, with hook deliveries put in the outbox
// in the same transaction.
func (x *run) updateStepWith(ctx context.Context, s db.Step, status string, data db.StepData, ds []db.HookDelivery) (db.Step, error) {
	s, err := x.a.store.UpdateStep(context.WithoutCancel(ctx), s.ID, status, data, x.withDeliveries(ds))
	if err == nil {
		x.h.Stepped()
	}
	return s, err
}
