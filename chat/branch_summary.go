package chat

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"weft/db"
)

// Branch summaries (issue 17): when the user leaves a branch of a thread
// that has them on, the model summarizes the branch left (the compaction
// summarizer, over that branch's messages only). The summary is stored as
// a node of the tree (db.BranchSummary) and shown where the branch forks;
// it is never part of a model request, since context assembly reads only
// messages.

// BranchSummarizer is the part of a Store that branch summaries use.
type BranchSummarizer interface {
	BranchSummaryWork(ctx context.Context, user, id int64, attempt int) (db.BranchSummaryWork, error)
	FinishBranchSummary(ctx context.Context, user, id int64, attempt int, model, summary, errText string) error
}

// branchSummaryTimeout bounds writing one summary (well below
// db.SummaryStallAfter, past which a pending summary counts as abandoned).
const branchSummaryTimeout = 2 * time.Minute

// SummarizeBranch writes a pending branch summary in the background and
// returns at once: the navigation that left the branch does not wait for
// the model. The outcome — the summary, or why there is none — is stored
// on the summary; a shutdown mid-way stores that too.
func (rt *Runtime) SummarizeBranch(user int64, s db.BranchSummary) {
	st, ok := rt.store.(BranchSummarizer)
	if !ok || s.Status != db.SummaryPending {
		return
	}
	// Added under the lock, before Shutdown can wait: a summary left while
	// the runtime stops says so at once instead of stalling.
	rt.mu.Lock()
	if rt.closing {
		rt.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := st.FinishBranchSummary(ctx, user, s.ID, s.Attempt, "", "", "The server was stopping, so the summary was not written. Retry it."); err != nil && !errors.Is(err, db.ErrNotFound) {
			slog.Warn("store branch summary", "summary", s.ID, "err", err)
		}
		return
	}
	rt.wg.Add(1)
	rt.mu.Unlock()
	go func() {
		defer rt.wg.Done()
		rt.summarizeBranch(st, user, s.ID, s.Attempt)
	}()
}

func (rt *Runtime) summarizeBranch(st BranchSummarizer, user, id int64, attempt int) {
	ctx, cancel := context.WithTimeout(rt.ctx, branchSummaryTimeout)
	defer cancel()
	work, err := st.BranchSummaryWork(ctx, user, id, attempt)
	if errors.Is(err, db.ErrNotFound) {
		return // written anew, removed, or the branch is gone
	}
	model := work.Model
	var text, errText string
	switch {
	case err != nil:
		errText = "The summary could not be written: the branch could not be read."
	case len(work.Turns) == 0:
		errText = "There is nothing on this branch to summarize."
	default:
		if model == "" {
			model = rt.models.Default(ctx)
		}
		if model == "" {
			errText = "No model is chosen for this thread, so the summary could not be written."
			break
		}
		cpt, _ := rt.charsPerToken(ctx, model)
		var serr error
		text, _, serr = rt.summarize(ctx, model, rt.models.NumCtx(ctx, model), cpt, "", work.Turns)
		if serr != nil {
			err = serr
			if rt.ctx.Err() != nil {
				errText = "The server stopped while the summary was being written. Retry it."
			} else {
				errText = "The summary could not be written. " + rt.describe(serr, model)
			}
		}
	}
	if err != nil {
		slog.Warn("branch summary", "summary", id, "err", err)
	}
	// Stored even when the runtime is stopping: nothing is left pending.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer scancel()
	if err := st.FinishBranchSummary(sctx, user, id, attempt, model, text, errText); err != nil && !errors.Is(err, db.ErrNotFound) {
		slog.Warn("store branch summary", "summary", id, "err", err)
	}
}
