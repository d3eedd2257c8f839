package importer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"weft/db"
	"weft/internal/jobs"
	"weft/internal/usererr"
)

// Queue is the job queue imports run on (one at a time per instance: an
// import is long and reads a large file).
const Queue = "imports"

// Args is the job that imports one uploaded file.
type Args struct {
	ImportID int64 `json:"import_id"`
}

// Kind names the job in River's table.
func (Args) Kind() string { return "conversation_import" }

// InsertOpts puts the job on its queue.
func (Args) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: 5}
}

// slice is how long one attempt works before it hands over to the next
// (a snooze, which costs no attempt): the queue's job timeout and its
// rescue of stuck jobs never see an import running for an hour.
const slice = 2 * time.Minute

// MaxPending is how many unfinished imports one user may have: each holds
// its file in the database until its job has read it.
const MaxPending = 3

// Service stores uploaded exports and imports them in the background.
type Service struct {
	store *db.DB
	queue *jobs.Queue
	lim   Limits
}

// New builds the service and registers its worker on queue.
func New(store *db.DB, queue *jobs.Queue, lim Limits) (*Service, error) {
	s := &Service{store: store, queue: queue, lim: lim.WithDefaults()}
	if err := queue.Register(func(w *river.Workers) error {
		return river.AddWorkerSafely(w, &worker{s: s})
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// Limits are the service's limits (defaults filled).
func (s *Service) Limits() Limits { return s.lim }

// ErrTooLarge refuses a file over Limits.MaxBytes.
type ErrTooLarge struct{ Max int64 }

func (e ErrTooLarge) Error() string {
	return fmt.Sprintf("that file is too large: exports up to %s can be imported", usererr.Size(e.Max))
}

// UserMessage makes it a usererr.Messager.
func (e ErrTooLarge) UserMessage() string { return usererr.Capitalize(e.Error()) + "." }

// Start stores an uploaded export of a detected format (FormatChatGPT or
// FormatOpenWebUI) for the user's workspace and queues its import, in one
// transaction. A workspace that is not the user's (or is archived) is
// db.ErrNotFound.
func (s *Service) Start(ctx context.Context, user, workspace int64, format, fileName string, file io.Reader) (db.Import, error) {
	if format != FormatChatGPT && format != FormatOpenWebUI {
		return db.Import{}, fmt.Errorf("importer: format %q is not imported in the background", format)
	}
	name, _ := clean(strings.TrimSpace(fileName), 200)
	imp, err := s.store.CreateImport(ctx, user, db.NewImport{Workspace: workspace, Format: format, FileName: name,
		File: file, MaxBytes: s.lim.MaxBytes, MaxPending: MaxPending}, func(tx pgx.Tx, id int64) error {
		return s.queue.InsertTx(ctx, tx, Args{ImportID: id}, nil)
	})
	if errors.Is(err, db.ErrTooLarge) {
		return db.Import{}, ErrTooLarge{Max: s.lim.MaxBytes}
	}
	if errors.Is(err, db.ErrTooManyImports) {
		return db.Import{}, usererr.Wrap(err, fmt.Sprintf("You have %d imports under way: wait for one to finish.", MaxPending))
	}
	return imp, err
}

type worker struct {
	river.WorkerDefaults[Args]
	s *Service
}

func (w *worker) Work(ctx context.Context, job *river.Job[Args]) error {
	s, id := w.s, job.Args.ImportID
	err := s.run(ctx, id)
	var fail failure
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errSliceOver):
		return river.JobSnooze(0)
	case ctx.Err() != nil:
		return river.JobSnooze(0) // shutting down: the next start resumes it
	case errors.As(err, &fail):
		return s.store.FinishImport(context.WithoutCancel(ctx), id, fail.msg)
	case errors.Is(err, db.ErrNotFound):
		return nil // deleted meanwhile
	case job.Attempt >= job.MaxAttempts:
		slog.Error("import failed for good", "import", id, "err", err)
		return s.store.FinishImport(context.WithoutCancel(ctx), id,
			"The import kept failing (it was tried "+fmt.Sprint(job.MaxAttempts)+" times); the server log has the details. The conversations listed were imported.")
	default:
		slog.Warn("import attempt failed; it will resume", "import", id, "attempt", job.Attempt, "err", err)
		return err
	}
}

// failure ends an import with a message for its owner.
type failure struct{ msg string }

func (f failure) Error() string { return f.msg }

var errSliceOver = errors.New("importer: this attempt's time is over")

// run does one attempt: count the conversations (once), then import every
// one not handled yet, each in its own transaction.
func (s *Service) run(ctx context.Context, id int64) error {
	imp, err := s.store.JobImport(ctx, id)
	if err != nil {
		return err
	}
	if imp.Finished() {
		return nil
	}
	if imp.Total == nil {
		n, err := Count(&chunkReader{ctx: ctx, store: s.store, id: id}, s.lim)
		var be *BrokenError
		if errors.As(err, &be) { // (or stopped while counting: FinishImport leaves a stopped import alone)
			return failure{msg: "Nothing was imported: " + be.Reason + "."}
		}
		if err != nil {
			return err
		}
		if n > s.lim.MaxConversations {
			return failure{msg: fmt.Sprintf("Nothing was imported: the file holds %d conversations; at most %d can be imported at once.", n, s.lim.MaxConversations)}
		}
		if err := s.store.StartImport(ctx, id, n); err != nil {
			return err
		}
	} else if err := s.store.StartImport(ctx, id, -1); err != nil {
		return err
	}
	deadline := time.Now().Add(cmpOrDur(s.lim.AttemptTime, slice))
	sc := NewScanner(&chunkReader{ctx: ctx, store: s.store, id: id}, s.lim)
	sc.discard = true
	for sc.Position() < imp.NextIndex {
		if _, err := sc.Next(); err != nil && !isSkip(err) {
			return fmt.Errorf("skip to conversation %d: %w", imp.NextIndex, err)
		}
	}
	sc.discard = false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		raw, err := sc.Next()
		if err == io.EOF {
			return s.store.FinishImport(ctx, id, "")
		}
		var be *BrokenError
		if errors.As(err, &be) {
			return failure{msg: "The import stopped: " + be.Reason + ". The conversations before it were imported."}
		}
		out := db.ImportOutcome{Position: sc.Position() - 1}
		if se := (*SkipError)(nil); errors.As(err, &se) {
			out.Title, out.Note = fmt.Sprintf("Conversation %d", out.Position+1), se.Reason
		} else if err != nil {
			return err
		} else {
			s.convert(imp.Format, raw, &out)
		}
		switch err := s.store.RecordImport(ctx, id, out); {
		case errors.Is(err, db.ErrImportMoved):
			return nil // another attempt is ahead of this one, or the owner stopped it
		case errors.Is(err, db.ErrNotFound):
			return failure{msg: "The import stopped: its workspace was archived. The conversations listed were imported."}
		case err != nil:
			return err
		}
		if time.Now().After(deadline) {
			return errSliceOver // after one conversation at least: every attempt moves on
		}
	}
}

// convert parses one conversation into an outcome: a thread, or the reason
// it was skipped.
func (s *Service) convert(format string, raw []byte, out *db.ImportOutcome) {
	var c Conversation
	var err error
	if format == FormatChatGPT {
		c, err = ParseChatGPT(raw, s.lim)
	} else {
		c, err = ParseOpenWebUI(raw, s.lim)
	}
	out.Title = c.Thread.Title
	if out.Title == "" {
		out.Title = looseTitle(raw, s.lim)
	}
	if out.Title == "" {
		out.Title = fmt.Sprintf("Conversation %d", out.Position+1)
	}
	out.MessagesSkipped, out.PartsSkipped = c.MessagesSkipped, c.PartsSkipped
	out.Note = strings.Join(c.Notes, "; ")
	if err != nil {
		out.Note = err.Error()
		return
	}
	out.Thread = &c.Thread
}

func isSkip(err error) bool {
	var se *SkipError
	return errors.As(err, &se)
}

func cmpOrDur(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

// chunkReader reads an import's stored file, one chunk at a time.
type chunkReader struct {
	ctx   context.Context
	store *db.DB
	id    int64
	seq   int
	buf   []byte
	eof   bool
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.eof {
			return 0, io.EOF
		}
		data, err := r.store.ImportChunk(r.ctx, r.id, r.seq)
		if errors.Is(err, db.ErrNotFound) {
			r.eof = true
			continue
		}
		if err != nil {
			return 0, err
		}
		r.seq++
		r.buf = data
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}
