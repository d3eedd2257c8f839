// Package chat is the conversation runtime shared by every route: it accepts
// a user's message (checking its files, the model and the user's storage
// before anything is written), queues a run for it, executes runs (at most
// one per thread, a capped number per user), streams their text to
// subscribers, flushes it to the database, and settles each run as
// complete, error, cancelled or interrupted. Follow reports a run to a
// reader wherever it executes; ThreadView reads a thread page from one
// snapshot. It also keeps the list of models and writes thread titles. It
// stores everything through db and speaks to the model server only through
// the Ollama client; it never renders HTML or reads HTTP requests.
package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"weft/db"
	"weft/internal/usererr"
)

// MaxMessageRunes caps one message's text.
const MaxMessageRunes = 100_000

// ErrEmpty and ErrTooLong reject a message before anything is stored.
var (
	ErrEmpty   = usererr.New("the message is empty")
	ErrTooLong = usererr.New("the message is longer than 100,000 characters")
)

// startIfNext kicks the thread and, when that started the run just created,
// reports it as running.
func (rt *Runtime) startIfNext(sent *db.Sent) {
	if r, ok := rt.kick(sent.Thread.ID); ok && r.ID == sent.Run.ID {
		sent.Run = r
	}
}

// Retry answers the user message above an assistant message again, as a new
// sibling answer (retry after an error, or regenerate); model "" keeps the
// thread's model.
func (rt *Runtime) Retry(ctx context.Context, user, assistantMsg int64, model string) (db.Sent, error) {
	return rt.queued(rt.store.RetryAnswer(ctx, user, assistantMsg, ChooseRoute, model))
}

// Edit stores a new version of a user message as its sibling and answers it.
func (rt *Runtime) Edit(ctx context.Context, user, message int64, content string) (db.Sent, error) {
	content, err := validContent(content)
	if errors.Is(err, ErrEmpty) {
		// The new version keeps the message's files: with them, no text is
		// a message too.
		files, ferr := rt.store.Attachments(ctx, user, []int64{message})
		if ferr != nil {
			return db.Sent{}, ferr
		}
		if len(files[message]) > 0 {
			content, err = "", nil
		}
	}
	if err != nil {
		return db.Sent{}, err
	}
	return rt.queued(rt.store.EditMessage(ctx, user, message, content, ChooseRoute))
}

// Continue goes on writing a stopped or interrupted answer.
func (rt *Runtime) Continue(ctx context.Context, user, assistantMsg int64) (db.Sent, error) {
	return rt.queued(rt.store.ContinueAnswer(ctx, user, assistantMsg, ""))
}

// Resume queues an interrupted agent run again, to go on from its last
// checkpoint.
func (rt *Runtime) Resume(ctx context.Context, user, run int64) (db.Run, error) {
	r, err := rt.store.ResumeRun(ctx, user, run)
	if err != nil {
		return db.Run{}, err
	}
	if started, ok := rt.kick(r.ThreadID); ok && started.ID == r.ID {
		r = started
	}
	return r, nil
}

// DeleteMessage removes a message and its subtree; answers being written
// inside it are stopped (here at once; on another instance at its next
// flush, which finds the run gone).
func (rt *Runtime) DeleteMessage(ctx context.Context, user, message int64) (db.DeletedSubtree, error) {
	del, err := rt.store.DeleteMessage(ctx, user, message)
	if err != nil {
		return del, err
	}
	rt.stopLive(del.ActiveRuns)
	return del, nil
}

// DeleteThread removes one of the user's threads after stopping its runs as
// Stop does: queued ones never start, a running answer's model request is
// cancelled here, or on the instance running it when it hears the stop note
// (or, should the note be lost, at its next flush: through cancel_requested,
// or because the run is gone by then). It returns the
// content hashes of the files the thread released.
func (rt *Runtime) DeleteThread(ctx context.Context, user, thread int64) ([]string, error) {
	active, err := rt.store.CancelThreadRuns(ctx, user, thread)
	if err != nil {
		return nil, fmt.Errorf("stop the thread's runs: %w", err)
	}
	rt.stopLive(active)
	released, err := rt.store.DeleteThread(ctx, user, thread)
	if err != nil {
		return nil, err
	}
	// A run started in between (a message sent meanwhile) is stopped too.
	rt.stopThread(thread)
	return released, nil
}

// StopUserRuns stops every run of an account as Stop does, on every
// instance (an administrator disabled or is deleting it): queued runs are
// cancelled, running and waiting ones are cancelled here at once and on the
// instance running them when it hears the stop note (or at its next
// flush); a pending approval or question settles as cancelled with its run.
// The account's API answers on this instance end too (they have no runs
// row, so other instances do not hear of them: a token of a disabled
// account is refused from its next request, on every instance).
func (rt *Runtime) StopUserRuns(ctx context.Context, user int64) error {
	rt.apiRuns.stopUser(user)
	active, err := rt.store.CancelUserRuns(ctx, user)
	if err != nil {
		return fmt.Errorf("stop the account's runs: %w", err)
	}
	rt.stopLive(active)
	return nil
}

// stopLive stops the runs of ids that execute on this instance.
func (rt *Runtime) stopLive(ids []int64) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, id := range ids {
		if lr := rt.live[id]; lr != nil {
			lr.stop(StopUser)
		}
	}
}

// stopThread stops every run of a thread that executes on this instance.
func (rt *Runtime) stopThread(thread int64) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, lr := range rt.live {
		if lr.threadID == thread {
			lr.stop(StopUser)
		}
	}
}

// queued starts a just-queued run when its thread and user have room.
func (rt *Runtime) queued(sent db.Sent, err error) (db.Sent, error) {
	if err != nil {
		return db.Sent{}, err
	}
	rt.startIfNext(&sent)
	return sent, nil
}

func validContent(content string) (string, error) {
	content = strings.TrimSpace(content)
	if content == "" {
		return "", ErrEmpty
	}
	if utf8.RuneCountInString(content) > MaxMessageRunes {
		return "", ErrTooLong
	}
	return content, nil
}

// provisionalTitle is the first line of the first message, shortened; a
// generated title replaces it once the model has answered.
func provisionalTitle(content string) string {
	line, _, _ := strings.Cut(content, "\n")
	line = strings.Join(strings.Fields(line), " ")
	const max = 60
	if line == "" {
		line = "Files"
	}
	if utf8.RuneCountInString(line) <= max {
		return line
	}
	r := []rune(line)
	return strings.TrimSpace(string(r[:max-1])) + "…"
}
