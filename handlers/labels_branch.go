package handlers

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"weft/db"
	"weft/views"
)

// branchSummaryStore is what the branch summary actions use.
type branchSummaryStore interface {
	SetSummarizeBranches(ctx context.Context, user, thread int64, on bool) error
	BranchSummary(ctx context.Context, user, id int64) (db.BranchSummary, error)
	RetryBranchSummary(ctx context.Context, user, id int64) (db.BranchSummary, error)
	DeleteBranchSummary(ctx context.Context, user, id int64) (int64, error)
}

// branchSummarizer writes a pending branch summary in the background
// (chat.Runtime.SummarizeBranch); it returns at once.
type branchSummarizer interface {
	SummarizeBranch(user int64, s db.BranchSummary)
}

// branchLeaver switches branch and keeps a pending summary of the branch
// left when the thread has summaries on (db.DB.LeaveBranch).
type branchLeaver interface {
	LeaveBranch(ctx context.Context, user, message int64) (db.BranchSwitch, error)
}

// leaveBranch is the branch switch of POST /m/{id}/select: the branch that
// message starts is shown, and the branch left is summarized in the
// background when the thread has summaries on. It returns the thread.
func leaveBranch(ctx context.Context, s messageStore, rt any, user, message int64) (int64, error) {
	bl, ok := s.(branchLeaver)
	if !ok {
		return s.SelectBranch(ctx, user, message)
	}
	sw, err := bl.LeaveBranch(ctx, user, message)
	if err != nil {
		return 0, err
	}
	if bs, ok := rt.(branchSummarizer); ok && sw.Summary != nil {
		bs.SummarizeBranch(user, *sw.Summary)
	}
	return sw.Thread, nil
}

// setSummarize serves POST /t/{id}/branch-summaries (summarize=true|false):
// whether leaving a branch of the thread writes its summary.
func (h *treePages) setSummarize(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	on, ok := formBool(r, "summarize")
	if !ok {
		badRequest(w, r, "Say summarize=true or summarize=false.")
		return
	}
	if err := h.store.SetSummarizeBranches(r.Context(), u.ID, id, on); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d", id))
}

// summary serves GET /branch-summaries/{id}: the summary's node, which a
// pending one polls until it is written.
func (h *treePages) summary(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	s, err := h.store.BranchSummary(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	render(w, r, http.StatusOK, views.BranchSummaryNode(s, time.Now()))
}

// retrySummary serves POST /branch-summaries/{id}/retry: a failed or
// abandoned summary is written again.
func (h *treePages) retrySummary(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	s, err := h.store.RetryBranchSummary(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	if h.summarizer != nil {
		h.summarizer.SummarizeBranch(u.ID, s)
	}
	redirect(w, r, fmt.Sprintf("/t/%d#bs%d", s.ThreadID, s.ID))
}

// deleteSummary serves POST /branch-summaries/{id}/delete.
func (h *treePages) deleteSummary(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	thread, err := h.store.DeleteBranchSummary(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d", thread))
}
