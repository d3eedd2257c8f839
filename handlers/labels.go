package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"weft/chat"
	"weft/db"
	"weft/internal/usererr"
	"weft/views"
)

// The tree, completed (issue 17): labels on messages and summaries of the
// branches the user leaves. Both are tree nodes of tables of their own
// (db/labels.go, db/branch_summaries.go), shown in the thread and never
// sent to the model.

// labelStore is what the label actions use.
type labelStore interface {
	AddLabel(ctx context.Context, user, message int64, name string) (db.Label, error)
	RenameLabel(ctx context.Context, user, id int64, name string) (db.Label, error)
	DeleteLabel(ctx context.Context, user, id int64) (db.Label, error)
	JumpToLabel(ctx context.Context, user, id int64) (db.Label, error)
	ThreadLabels(ctx context.Context, user, thread int64) ([]db.Label, error)
	Message(ctx context.Context, user, id int64) (db.Message, error)
}

// treeReader is what a thread's page reads of its labels and summaries.
type treeReader interface {
	ThreadLabels(ctx context.Context, user, thread int64) ([]db.Label, error)
	MessageLabels(ctx context.Context, user, thread int64, msgs []int64) (map[int64][]db.Label, error)
	BranchSummariesBeside(ctx context.Context, user, thread int64, msgs []db.Message) (map[int64][]db.BranchSummary, error)
	SummarizeBranches(ctx context.Context, user, thread int64) (bool, error)
}

// treePages serves the actions on labels and branch summaries.
type treePages struct {
	store      treeStore
	summarizer branchSummarizer // nil: summaries stay pending (no runtime)
}

// treeStore is what treePages use.
type treeStore interface {
	labelStore
	branchSummaryStore
}

// treeRoutes are the routes of labels and branch summaries.
func (e *endpoints) treeRoutes(r chi.Router) {
	tp := &treePages{store: e.store}
	tp.summarizer, _ = e.messages.rt.(branchSummarizer)
	r.Post("/m/{id}/labels", tp.addLabel)
	r.Post("/labels/{id}/rename", tp.renameLabel)
	r.Post("/labels/{id}/delete", tp.deleteLabel)
	r.Post("/labels/{id}/jump", tp.jump)
	r.Post("/t/{id}/branch-summaries", tp.setSummarize)
	r.Get("/branch-summaries/{id}", tp.summary)
	r.Post("/branch-summaries/{id}/retry", tp.retrySummary)
	r.Post("/branch-summaries/{id}/delete", tp.deleteSummary)
}

// labelURL is the thread page at a label's message.
func labelURL(l db.Label) string { return fmt.Sprintf("/t/%d#m%d", l.ThreadID, l.MessageID) }

// addLabel serves POST /m/{id}/labels (field name).
func (h *treePages) addLabel(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	l, err := h.store.AddLabel(r.Context(), u.ID, id, r.PostForm.Get("name"))
	if labelRefused(w, r, err) {
		return
	}
	redirect(w, r, labelURL(l))
}

// renameLabel serves POST /labels/{id}/rename (field name).
func (h *treePages) renameLabel(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	l, err := h.store.RenameLabel(r.Context(), u.ID, id, r.PostForm.Get("name"))
	if labelRefused(w, r, err) {
		return
	}
	redirect(w, r, labelURL(l))
}

// deleteLabel serves POST /labels/{id}/delete.
func (h *treePages) deleteLabel(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	l, err := h.store.DeleteLabel(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, labelURL(l))
}

// jump serves POST /labels/{id}/jump: the thread shows a branch through
// the label's message (switching branch when the one shown does not run
// through it), at that message.
func (h *treePages) jump(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	l, err := h.store.JumpToLabel(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, labelURL(l))
}

// labelRefused answers a failed label action (a bad name is a 400 that
// says why) and reports whether it failed.
func labelRefused(w http.ResponseWriter, r *http.Request, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, db.ErrLabelEmpty), errors.Is(err, db.ErrLabelTooLong), errors.Is(err, db.ErrLabelsFull):
		badRequest(w, r, "Not labelled: "+usererr.Or(err, "the name could not be read")+".")
	default:
		storeError(w, r, err)
	}
	return true
}

// cmdLabel is /label NAME: a label on the thread's last message (its
// active leaf); /label alone lists the thread's labels.
func (h *threads) cmdLabel(w http.ResponseWriter, r *http.Request, u db.User, in chat.Input, t db.Thread, arg string) {
	ls, ok := h.store.(labelStore)
	if !ok {
		h.refuse(w, r, in, "Labels are not available here.")
		return
	}
	if arg == "" {
		all, err := ls.ThreadLabels(r.Context(), u.ID, t.ID)
		if err != nil {
			serverError(w, r, err)
			return
		}
		if len(all) == 0 {
			h.notice(w, r, in, "This thread has no labels yet. /label NAME labels the last message; every message has a Label control too.")
			return
		}
		names := make([]string, len(all))
		for i, l := range all {
			names[i] = "“" + l.Name + "”"
		}
		h.notice(w, r, in, "Labels in this thread: "+strings.Join(names, ", ")+". The Labels list at the top jumps to them.")
		return
	}
	if t.ActiveLeafID == nil {
		h.refuse(w, r, in, "There is no message to label yet.")
		return
	}
	l, err := ls.AddLabel(r.Context(), u.ID, *t.ActiveLeafID, arg)
	switch {
	case errors.Is(err, db.ErrLabelEmpty), errors.Is(err, db.ErrLabelTooLong), errors.Is(err, db.ErrLabelsFull):
		h.refuse(w, r, in, "Not labelled: "+usererr.Or(err, "the name could not be read")+". For example: /label first draft")
		return
	case err != nil:
		storeError(w, r, err)
		return
	}
	h.flashTo(w, r, in, "Labelled the last message “"+l.Name+"”.")
}

// fillTree puts each message's labels and the summaries of the branches
// forking off beside it on the views (a failure is logged: the page shows
// without them).
func fillTree(ctx context.Context, s any, user int64, out []views.MessageView) {
	tr, ok := s.(treeReader)
	if !ok || len(out) == 0 {
		return
	}
	thread := out[0].Message.ThreadID
	ids := make([]int64, len(out))
	msgs := make([]db.Message, len(out))
	for i, m := range out {
		ids[i], msgs[i] = m.Message.ID, m.Message
	}
	labels, err := tr.MessageLabels(ctx, user, thread, ids)
	if err != nil {
		slog.WarnContext(ctx, "message labels", "thread", thread, "err", err)
	}
	summaries, err := tr.BranchSummariesBeside(ctx, user, thread, msgs)
	if err != nil {
		slog.WarnContext(ctx, "branch summaries", "thread", thread, "err", err)
	}
	for i := range out {
		out[i].Tree = views.MessageTree{Labels: labels[out[i].Message.ID], Summaries: summaries[out[i].Message.ID]}
	}
}

// threadTree is the thread page's list of labels and its branch summary
// setting (a failure is logged: the page shows without them).
func threadTree(ctx context.Context, s any, user, thread int64) views.ThreadTree {
	tr, ok := s.(treeReader)
	if !ok {
		return views.ThreadTree{}
	}
	var tt views.ThreadTree
	var err error
	if tt.Labels, err = tr.ThreadLabels(ctx, user, thread); err != nil {
		slog.WarnContext(ctx, "thread labels", "thread", thread, "err", err)
	}
	if tt.SummarizeBranches, err = tr.SummarizeBranches(ctx, user, thread); err != nil {
		slog.WarnContext(ctx, "summarize branches", "thread", thread, "err", err)
	}
	tt.Available = true
	return tt
}
