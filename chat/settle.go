package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"time"

	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/internal/usererr"
)

// Why a run was stopped (liveRun.stop).
const (
	StopUser     = "user"     // its user pressed Stop, here or on another instance
	StopShutdown = "shutdown" // this server is stopping
)

// ending is how a run's work ended, as settle needs it.
type ending struct {
	done    bool      // the model (or the agent) gave its final answer
	err     error     // why it failed (nil: the model server ended early)
	model   string    // named in the failure's message
	started time.Time // for the run's wall time
	// interrupted is the answer's error when the server stopped the run.
	interrupted string
	// logAs is the log message of a failure, logged when logged says so
	// (a failure the user is told about in its own words is not).
	logAs  string
	logged func(error) bool
}

// settle decides the outcome of a run, the same way for every route, and
// stores it: done → complete; stopped by its user → cancelled; stopped
// otherwise (shutdown) → interrupted, with e.interrupted; anything else →
// failed, with a message for the user.
func (rt *Runtime) settle(ctx context.Context, lr *liveRun, r db.Run, fin db.Finish, e ending) {
	switch {
	case e.done:
		fin.RunStatus, fin.MsgStatus = db.RunCompleted, db.MsgComplete
	case ctx.Err() != nil && lr.reason() == StopUser:
		fin.RunStatus, fin.MsgStatus = db.RunCancelled, db.MsgCancelled
	case ctx.Err() != nil:
		fin.RunStatus, fin.MsgStatus = db.RunInterrupted, db.MsgInterrupted
		fin.Error = e.interrupted
	default:
		fin.RunStatus, fin.MsgStatus = db.RunFailed, db.MsgError
		fin.Error = rt.describe(e.err, e.model)
		if e.err != nil && e.logged(e.err) {
			slog.Warn(e.logAs, "run", r.ID, "model", e.model, "err", e.err)
		}
	}
	fin.Usage.WallMS = time.Since(e.started).Milliseconds()
	rt.finish(ctx, lr, r, fin)
}

// finish writes the outcome of a run, even when the run's context was
// cancelled, and tells its watchers.
func (rt *Runtime) finish(ctx context.Context, lr *liveRun, r db.Run, fin db.Finish) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	// The final write stores the whole text and deletes the progress: no
	// progress round may write this run after it.
	rt.progress.forget(lr)
	msg, err := rt.store.FinishRun(wctx, r.ID, lr.msgID, fin)
	if errors.Is(err, db.ErrNotFound) {
		slog.Info("the answer was deleted while being written", "run", r.ID)
	} else if err != nil {
		slog.Error("finish run", "run", r.ID, "err", err)
	}
	if err != nil {
		msg = db.Message{ID: lr.msgID, ThreadID: r.ThreadID, Role: db.RoleAssistant, Content: fin.Content,
			Status: fin.MsgStatus, Error: fin.Error}
	} else if rt.cfg.Finalized != nil {
		rt.cfg.Finalized(wctx, r.OwnerID, msg)
	}
	lr.end(msg)
	rt.mu.Lock()
	delete(rt.live, r.ID)
	rt.mu.Unlock()
	// A room's answer is not its owner's turn: no automatic read-aloud
	// or images of the owner's, no memories extracted.
	if err == nil && fin.RunStatus == db.RunCompleted && rt.cfg.Answered != nil && !roomRun(r) {
		rt.cfg.Answered(r.OwnerID, r.ThreadID, lr.msgID)
	}
	if err == nil {
		rt.goalSettled(r, fin, lr.msgID) // goal mode: judged here, where the run settled (chat/goal.go)
	}
}

// ModelError is a failure that the model server's client returned (not
// the database's, not Weft's): the runtime describes it by its type, and a
// mid-stream error is the model server's own words, quoted as untrusted
// text.
type ModelError struct{ Err error }

func (e *ModelError) Error() string { return e.Err.Error() }
func (e *ModelError) Unwrap() error { return e.Err }

// modelFailure marks err, returned by the model client, as the model
// server's.
func modelFailure(err error) error {
	if err == nil {
		return nil
	}
	return &ModelError{Err: err}
}

// ErrNoModel is returned when a thread has no model to answer with.
var ErrNoModel = errors.New("no model")

// describe turns a run's failure into a message for the user: what
// happened and what to do, without internals. An error that carries its
// own message (usererr) says it; a failure of the model server is named by
// its type; anything else (the database, a file, a bug) is a generic
// message, its text only in the log.
func (rt *Runtime) describe(err error, model string) string {
	var se api.StatusError
	var ue *url.Error
	var ne net.Error
	var me *ModelError
	if msg, ok := usererr.Message(err); ok {
		return msg
	}
	switch {
	case err == nil:
		return "The model server ended the answer before it was complete."
	case errors.Is(err, ErrNoModel):
		return "No model is chosen for this thread. Pick one in the composer and retry."
	case errors.As(err, &se) && se.StatusCode == 404:
		return fmt.Sprintf("Model %q is not available on the Ollama server at %s. An administrator can pull it on the Models page (/admin/models, or `ollama pull %s` on the server), or choose another model.", model, rt.cfg.OllamaHost, model)
	case errors.As(err, &se):
		// Ollama's own words about the model help (a model that cannot
		// chat, a context too long); they are another server's text, so
		// they are quoted cleaned and short.
		if msg := usererr.Untrusted(se.ErrorMessage, maxServerMessage); msg != "" {
			return "The model server refused the request: " + msg
		}
		return fmt.Sprintf("The model server refused the request (HTTP %d).", se.StatusCode)
	case errors.As(err, &ue), errors.As(err, &ne):
		return fmt.Sprintf("Ollama is not reachable at %s. Start it with `ollama serve`, or set OLLAMA_HOST to where it runs, then retry.", unreachableAt(err, rt.cfg.OllamaHost))
	case errors.As(err, &me) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		// An error line in the stream: the model server's words.
		if msg := usererr.Untrusted(me.Err.Error(), maxServerMessage); msg != "" {
			return "The model stopped with an error: " + msg
		}
		return GenericFailure
	default:
		return GenericFailure
	}
}

// unreachableAt is where the model server that did not answer is: the
// servers an *UnreachableError names (those that have the model, with
// several), else host.
func unreachableAt(err error, host string) string {
	var ur *UnreachableError
	if errors.As(err, &ur) && ur.Where() != "" {
		return ur.Where()
	}
	return host
}

// GenericFailure is what a user is told about a failure that carries no
// message of its own; its details are in the server log.
const GenericFailure = "The answer failed because of an error on the server; the server log has the details. Retry in a moment."

// maxServerMessage caps the model server's error text quoted to the user.
const maxServerMessage = 300
