package handlers

import (
	"context"
	"log/slog"
	"net/http"

	"weft/db"
	"weft/views"
)

// commandLog keeps slash commands and their replies as the thread's
// command entries (db.CommandEntry): shown in the thread after the message
// that was its active leaf, after a reload too, and never sent to the
// model (they are not messages).
type commandLog interface {
	AddCommandEntry(ctx context.Context, user, thread int64, after *int64, command, reply string, failed bool) (db.CommandEntry, error)
	CommandEntries(ctx context.Context, user, thread int64, after []int64) ([]db.CommandEntry, error)
}

// cmdReply is the reply of the command being run, noted by notice, flashTo
// and refuse.
type cmdReply struct {
	text   string
	failed bool
}

type cmdReplyKey struct{}

// withCmdReply marks r as a command's request: its reply is noted.
func withCmdReply(r *http.Request) (*http.Request, *cmdReply) {
	rep := &cmdReply{}
	return r.WithContext(context.WithValue(r.Context(), cmdReplyKey{}, rep)), rep
}

// noteReply notes a command's reply (nothing outside a command).
func noteReply(r *http.Request, text string, failed bool) {
	if rep, ok := r.Context().Value(cmdReplyKey{}).(*cmdReply); ok {
		rep.text, rep.failed = text, failed
	}
}

// keepCommand stores the command typed into a thread with its reply,
// after the message that was the thread's active leaf when it was typed
// (read before the command ran: /queue and /retry add answers); a failure
// to keep it is logged, the command's outcome stands. Call the returned
// func once the command ran.
func (h *threads) keepCommand(r *http.Request, user, thread int64, text string, rep *cmdReply) func() {
	cl, ok := h.store.(commandLog)
	if !ok || thread == 0 {
		return func() {}
	}
	t, err := h.store.Thread(r.Context(), user, thread)
	if err != nil {
		return func() {} // not the user's thread: the command says so
	}
	return func() {
		if _, err := cl.AddCommandEntry(context.WithoutCancel(r.Context()), user, thread, t.ActiveLeafID, text, rep.text, rep.failed); err != nil {
			slog.WarnContext(r.Context(), "keep command entry", "thread", thread, "err", err)
		}
	}
}

// fillCommands puts the thread's command entries under the messages they
// follow.
func fillCommands(ctx context.Context, s any, user int64, out []views.MessageView) {
	cl, ok := s.(commandLog)
	if !ok || len(out) == 0 {
		return
	}
	ids := make([]int64, len(out))
	at := map[int64]int{}
	for i, m := range out {
		ids[i] = m.Message.ID
		at[m.Message.ID] = i
	}
	entries, err := cl.CommandEntries(ctx, user, out[0].Message.ThreadID, ids)
	if err != nil {
		slog.WarnContext(ctx, "command entries", "thread", out[0].Message.ThreadID, "err", err)
		return
	}
	for _, e := range entries {
		if e.AfterMessageID != nil {
			i := at[*e.AfterMessageID]
			out[i].Commands = append(out[i].Commands, e)
		}
	}
}
