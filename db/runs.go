package db

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Run statuses.
const (
	RunQueued      = "queued"
	RunRunning     = "running"
	RunWaiting     = "waiting"
	RunCompleted   = "completed"
	RunFailed      = "failed"
	RunCancelled   = "cancelled"
	RunInterrupted = "interrupted"
)

// Message statuses.
const (
	MsgStreaming   = "streaming"
	MsgComplete    = "complete"
	MsgError       = "error"
	MsgCancelled   = "cancelled"
	MsgInterrupted = "interrupted"
)

// Run is one execution of a route for one user message.
type Run struct {
	ID                 int64           `db:"id"`
	ThreadID           int64           `db:"thread_id"`
	OwnerID            int64           `db:"owner_id"`
	Kind               string          `db:"kind"`
	Status             string          `db:"status"`
	InstanceID         string          `db:"instance_id"`
	UserMessageID      *int64          `db:"user_message_id"`
	AssistantMessageID *int64          `db:"assistant_message_id"`
	Model              string          `db:"model"`
	Usage              json.RawMessage `db:"usage"`
	Error              string          `db:"error"`
	CancelRequested    bool            `db:"cancel_requested"`
	Continues          bool            `db:"continues"` // goes on writing an existing answer
	// ParentRunID is set on a sub-agent's run: the agent run that
	// delegated it (it has no messages of its own).
	ParentRunID *int64 `db:"parent_run_id"`
	// A room run (issue 20): the agent answering, the member whose
	// message started the chain (they decide its approvals and answer its
	// questions; they or the room's owner may stop it), and how many
	// agent-to-agent mentions led to it. Nil and 0 in a thread.
	RoomAgentID  *int64     `db:"room_agent_id"`
	AskedBy      *int64     `db:"asked_by"`
	MentionDepth int        `db:"mention_depth"`
	CreatedAt    time.Time  `db:"created_at"`
	StartedAt    *time.Time `db:"started_at"`
	FinishedAt   *time.Time `db:"finished_at"`
}

// Active reports whether the run is queued, running or waiting.
func (r Run) Active() bool {
	return r.Status == RunQueued || r.Status == RunRunning || r.Status == RunWaiting
}

const runCols = `id, thread_id, owner_id, kind, status, instance_id, user_message_id, assistant_message_id,
	model, usage, error, cancel_requested, continues, created_at, started_at, finished_at, parent_run_id,
	room_agent_id, asked_by, mention_depth`

// Run returns one of the user's runs.
func (d *DB) Run(ctx context.Context, user, id int64) (Run, error) {
	rows, err := d.q().Query(ctx, "SELECT "+runCols+" FROM runs WHERE id = $1 AND owner_id = $2", id, user)
	if err != nil {
		return Run{}, err
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Run])
	return r, mapErr(err)
}

// ActiveRuns lists the thread's queued, running and waiting runs, oldest
// first.
func (d *DB) ActiveRuns(ctx context.Context, user, thread int64) ([]Run, error) {
	rows, err := d.q().Query(ctx, "SELECT "+runCols+` FROM runs
		WHERE thread_id = $1 AND owner_id = $2 AND status IN ('queued', 'running', 'waiting') AND parent_run_id IS NULL
		ORDER BY id`, thread, user)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Run])
}

// ClaimNextRun starts the oldest queued run of a thread on this instance,
// unless the thread already has a running one or the owner already has
// userCap active runs (running, or waiting for the user's approval: a run
// waiting holds its slot, or one user could park any number of them). ok is false when nothing was started. The user row
// is locked so that concurrent claims, from any instance, respect both
// limits (a thread's second running run also fails its unique index);
// FOR NO KEY UPDATE, which excludes other claims (and SetUserDisabled's
// update) but not the FOR KEY SHARE of a foreign-key check: a tree edit
// holding this thread's runs may need that while the claim waits for one
// of them (run_locks.go). A disabled account's runs never start: its
// queued ones are cancelled here instead.
//
// A thread with nothing queued is answered by one read, without the lock
// and its transaction: every run's end tries its thread (rarely with
// anything queued), and with one user's answers ending together those
// claims queued on the user's row. Nothing is missed: whoever queues a run
// tries to start it after its commit (or notes it for every instance).
func (d *DB) ClaimNextRun(ctx context.Context, thread int64, instance string, userCap int) (r Run, ok bool, err error) {
	var queued bool
	if err := d.q().QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM runs WHERE thread_id = $1 AND status = 'queued')", thread).Scan(&queued); err != nil {
		return Run{}, false, mapErr(err)
	}
	if !queued {
		return Run{}, false, nil
	}
	err = d.InTx(ctx, func(tx pgx.Tx) error {
		var owner int64
		if err := tx.QueryRow(ctx, "SELECT owner_id FROM threads WHERE id = $1", thread).Scan(&owner); err != nil {
			return err
		}
		var disabled bool
		if err := tx.QueryRow(ctx, "SELECT disabled FROM users WHERE id = $1 FOR NO KEY UPDATE", owner).Scan(&disabled); err != nil {
			return err
		}
		if disabled {
			// A send let in just before its account was disabled can queue
			// a run after the account's runs were stopped: it never starts
			// (the row lock orders this claim and SetUserDisabled).
			_, err := cancelUserRuns(ctx, tx, owner)
			return err
		}
		var busy bool
		var running int
		if err := tx.QueryRow(ctx, `SELECT
				EXISTS (SELECT 1 FROM runs WHERE thread_id = $1 AND status IN ('running', 'waiting') AND parent_run_id IS NULL),
				(SELECT count(*) FROM runs WHERE owner_id = $2 AND status IN ('running', 'waiting') AND parent_run_id IS NULL)`, thread, owner).Scan(&busy, &running); err != nil {
			return err
		}
		if busy || running >= userCap {
			return nil
		}
		rows, err := tx.Query(ctx, `UPDATE runs SET status = 'running', instance_id = $2, started_at = now()
			WHERE id = (SELECT id FROM runs WHERE thread_id = $1 AND status = 'queued' ORDER BY id LIMIT 1)
			RETURNING `+runCols, thread, instance)
		if err != nil {
			return err
		}
		r, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Run])
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		// Its followers elsewhere (it was queued) see it run.
		return notifyRuns(ctx, tx, NoteStarted, []int64{r.ID})
	})
	return r, ok, mapErr(err)
}

// ThreadsWithQueuedRuns lists threads that have queued runs, oldest queued
// first; owner limits it to one user's threads (0: everyone's).
func (d *DB) ThreadsWithQueuedRuns(ctx context.Context, owner int64) ([]int64, error) {
	rows, err := d.q().Query(ctx, `SELECT thread_id FROM runs WHERE status = 'queued' AND ($1 = 0 OR owner_id = $1)
		GROUP BY thread_id ORDER BY min(id)`, owner)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// Progress is the text a streaming answer gained since its previous
// flush: one row of message_progress. Seq numbers a run's flushes; a retry
// of a flush whose commit was lost sends the same Seq again with at least
// the same text, and replaces the row (nothing duplicated, nothing lost).
type Progress struct {
	Run      int64 // the run writing it, when other instances follow it (NoteProgress; 0: no note)
	Message  int64
	Seq      int
	Content  string // answer text appended
	Thinking string // thinking text appended
	// Restart drops the text stored so far (an agent's next round, or a
	// run that writes the answer anew) before Content and Thinking.
	Restart bool
}

// SaveProgress appends the progress of streaming answers, and reports
// which of the live runs should stop: someone asked (possibly on another
// instance), or the run is gone (deleted with its thread or message). One
// transaction, sent as one batch, committed without waiting for the disk:
// the run's final write (FinishRun) is synchronous. A message that is no
// longer streaming (settled elsewhere, or deleted, even by a transaction
// still committing) gets nothing.
//
// broken lists the messages whose row was not written because the row
// before it (seq - 1) is missing: an asynchronous commit lost when
// PostgreSQL crashed after saying it succeeded. The caller writes such an
// answer anew (Restart with all its text), so a lost row never leaves a
// gap in the middle of the text. NUL bytes, which PostgreSQL text cannot
// hold, are left out (so one answer's NUL cannot fail every run's round).
func (d *DB) SaveProgress(ctx context.Context, parts []Progress, live []int64) (stop, broken []int64, err error) {
	var restart, msgs, noted []int64
	var seqs []int32
	var contents, thinkings []string
	var restarts []bool
	for _, p := range parts {
		if p.Restart {
			restart = append(restart, p.Message)
		}
		if p.Content != "" || p.Thinking != "" {
			msgs, seqs = append(msgs, p.Message), append(seqs, int32(p.Seq))
			contents, thinkings = append(contents, noNUL(p.Content)), append(thinkings, noNUL(p.Thinking))
			restarts = append(restarts, p.Restart)
		}
		if p.Run != 0 && (p.Restart || p.Content != "" || p.Thinking != "") {
			noted = append(noted, p.Run)
		}
	}
	err = d.InTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue("SET LOCAL synchronous_commit = off")
		if len(restart) > 0 {
			// The answers' rows before their progress rows, in the mode
			// the update below needs (run_locks.go).
			b.Queue("SELECT id FROM messages WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE", restart)
			b.Queue("DELETE FROM message_progress WHERE message_id = ANY($1)", restart)
			b.Queue(`UPDATE messages SET content = '', metadata = metadata - 'thinking', updated_at = now()
				WHERE id = ANY($1) AND status = 'streaming' AND (content <> '' OR metadata ? 'thinking')`, restart)
		}
		written := map[int64]bool{}
		if len(msgs) > 0 {
			// The messages are locked (FOR KEY SHARE, in id order) before
			// their rows go in: a delete still committing is waited for
			// and its message then skipped, instead of failing the
			// foreign key and with it every run's round. A row goes in
			// only after its predecessor (seq - 1), or as a run's first
			// or restarting row; RETURNING says which did.
			b.Queue(`INSERT INTO message_progress (message_id, seq, content, thinking)
				SELECT u.m, u.s, u.c, u.t
				FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::bool[]) AS u(m, s, c, t, r)
					JOIN (SELECT id FROM messages WHERE id = ANY($1) AND status = 'streaming' ORDER BY id FOR KEY SHARE) msg ON msg.id = u.m
				WHERE u.r OR u.s = 0 OR EXISTS (SELECT 1 FROM message_progress p WHERE p.message_id = u.m AND p.seq = u.s - 1)
				ON CONFLICT (message_id, seq) DO UPDATE SET content = EXCLUDED.content, thinking = EXCLUDED.thinking
				RETURNING message_id`,
				msgs, seqs, contents, thinkings, restarts).Query(func(rows pgx.Rows) error {
				var id int64
				_, err := pgx.ForEachRow(rows, []any{&id}, func() error { written[id] = true; return nil })
				return err
			})
			// Which of the unwritten ones are still streaming (the others
			// were settled or deleted: nothing to repair).
			b.Queue("SELECT id FROM messages WHERE id = ANY($1) AND status = 'streaming'", msgs).Query(func(rows pgx.Rows) error {
				var id int64
				_, err := pgx.ForEachRow(rows, []any{&id}, func() error {
					if !written[id] {
						broken = append(broken, id)
					}
					return nil
				})
				return err
			})
		}
		if len(noted) > 0 {
			// Delivered at commit, so a follower elsewhere reads these rows.
			b.Queue(`SELECT pg_notify($1, 'p ' || r) FROM unnest($2::bigint[]) AS r`, RunChannel, noted)
		}
		going := make(map[int64]bool, len(live))
		// A run another instance settled meanwhile (it took this one
		// for dead) stops too, so two runs never write one answer.
		b.Queue("SELECT id FROM runs WHERE id = ANY($1) AND NOT cancel_requested AND status IN ('running', 'waiting')", live).Query(func(rows pgx.Rows) error {
			var id int64
			_, err := pgx.ForEachRow(rows, []any{&id}, func() error { going[id] = true; return nil })
			return err
		})
		broken = broken[:0]
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		stop = stop[:0]
		for _, id := range live {
			if !going[id] {
				stop = append(stop, id)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return stop, broken, nil
}

// noNUL is s without NUL bytes, which PostgreSQL text cannot store.
func noNUL(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", "")
}

// progressText folds the progress rows of message $1 into the message
// (as the columns of an UPDATE ... FROM progressText p): the content they
// append, and their thinking when they carry some.
const progressText = `(SELECT string_agg(content, '' ORDER BY seq) AS c, string_agg(NULLIF(thinking, ''), '' ORDER BY seq) AS t
	FROM message_progress WHERE message_id = $1)`

// CancelThreadRuns stops every run of one of the user's threads, as Stop
// does, before the thread is deleted: queued runs are cancelled (so none
// starts), running and waiting ones get cancel_requested (the instance
// running one stops it on the stop note sent after the update, or at its
// next flush). It returns the ids of the runs
// that were running or waiting, for the runtime to stop the ones it holds.
func (d *DB) CancelThreadRuns(ctx context.Context, user, thread int64) ([]int64, error) {
	rows, err := d.q().Query(ctx, `UPDATE runs SET
			status = CASE WHEN status = 'queued' THEN 'cancelled' ELSE status END,
			finished_at = CASE WHEN status = 'queued' THEN now() ELSE finished_at END,
			cancel_requested = status IN ('running', 'waiting') OR cancel_requested
		WHERE thread_id = $1 AND owner_id = $2 AND status IN ('queued', 'running', 'waiting')
		RETURNING id, status`, thread, user)
	if err != nil {
		return nil, err
	}
	type cancelled struct {
		ID     int64
		Status string
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[cancelled])
	if err != nil {
		return nil, err
	}
	var active, ended []int64
	for _, c := range all {
		if c.Status != RunCancelled {
			active = append(active, c.ID)
		} else {
			ended = append(ended, c.ID)
		}
	}
	// After the commit (one statement, its own): the instances running
	// these stop them at once, followers of the cancelled ones end.
	d.sendNotes(ctx, appendNotes(appendNotes(nil, NoteStop, active), NoteEnd, ended))
	return active, nil
}

// Finish is how a run ended.
type Finish struct {
	RunStatus string
	MsgStatus string
	Content   string
	Thinking  string
	Error     string
	Usage     Usage // also stored on the message's metadata
	// Meta holds more metadata keys for the answer (sources, nothing found,
	// the agent's evidence); the keys it leaves zero are not changed.
	Meta MessageMeta
}

// FinishRun records the end of a run and its answer in one transaction and
// returns the final message.
func (d *DB) FinishRun(ctx context.Context, run, msg int64, f Finish) (Message, error) {
	var m Message
	var owner int64
	usage, extra := f.Usage, f.Meta
	extra.Usage, extra.Thinking, extra.Raw = Usage{}, "", nil
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		// The run first, then its answer, then the answer's progress
		// (run_locks.go).
		err := tx.QueryRow(ctx, `UPDATE runs SET status = $2, error = $3, usage = $4, finished_at = now() WHERE id = $1
			RETURNING owner_id`, run, f.RunStatus, f.Error, usage).Scan(&owner)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err // no rows: the run went with its thread, nothing to tell
		}
		rows, err := tx.Query(ctx, `UPDATE messages SET content = $2, status = $3, error = $4,
				metadata = metadata || jsonb_build_object('usage', $5::jsonb)
					|| CASE WHEN $6 = '' THEN '{}'::jsonb ELSE jsonb_build_object('thinking', $6::text) END
					|| $7::jsonb,
				updated_at = now()
			WHERE id = $1 RETURNING `+messageCols, msg, noNUL(f.Content), f.MsgStatus, noNUL(f.Error), usage, noNUL(f.Thinking), extra)
		if err != nil {
			return err
		}
		if m, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Message]); err != nil {
			return err
		}
		// The whole text is on the row now: its progress goes.
		if _, err := tx.Exec(ctx, "DELETE FROM message_progress WHERE message_id = $1", msg); err != nil {
			return err
		}
		if owner == 0 {
			return nil
		}
		return settleLateSteers(ctx, tx, run)
	})
	if err != nil || owner == 0 {
		return m, mapErr(err)
	}
	// After the commit, not in it: a transaction that notifies holds a
	// lock that serializes all notifying commits, and this one waits for
	// the disk. Its followers end now; and if the user has runs queued
	// (behind this one, or behind the cap) an idle instance may start
	// them (this one tries too: the claim's locks decide).
	if _, err := d.Pool.Exec(ctx, `SELECT pg_notify($1, 'e ' || $2::bigint),
			CASE WHEN EXISTS (SELECT 1 FROM runs WHERE status = 'queued' AND owner_id = $3)
				THEN pg_notify($1, 'q ' || $3::bigint) END`, RunChannel, run, owner); err != nil {
		slog.Warn("notify a run's end", "run", run, "err", err)
	}
	return m, nil
}

// CancelRun stops one of the user's runs. A queued run is cancelled at once
// (with its empty answer); a running one is flagged, and the instance that
// runs it stops it when it hears the stop note sent right after the commit (or
// at its next flush, should the note be lost).
func (d *DB) CancelRun(ctx context.Context, user, id int64) (Run, error) {
	var r Run
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE runs SET
				status = CASE WHEN status = 'queued' THEN 'cancelled' ELSE status END,
				finished_at = CASE WHEN status = 'queued' THEN now() ELSE finished_at END,
				cancel_requested = status IN ('running', 'waiting') OR cancel_requested
			WHERE id = $1 AND owner_id = $2 RETURNING `+runCols, id, user)
		if err != nil {
			return err
		}
		if r, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Run]); err != nil {
			return err
		}
		if r.Status == RunCancelled && r.AssistantMessageID != nil {
			if _, err = tx.Exec(ctx, `UPDATE messages SET status = 'cancelled', updated_at = now()
				WHERE id = $1 AND status = 'streaming'`, *r.AssistantMessageID); err != nil {
				return err
			}
		}
		// Right after the commit (InTx): the instance running it stops it
		// as soon as the flag is visible (a queued run's followers end).
		kind := byte(NoteStop)
		if !r.Active() {
			kind = NoteEnd
		}
		return notifyRuns(ctx, tx, kind, []int64{r.ID})
	})
	return r, mapErr(err)
}

// Message returns one of the user's messages.
func (d *DB) Message(ctx context.Context, user, id int64) (Message, error) {
	rows, err := d.q().Query(ctx, "SELECT "+liveCols("m.")+` FROM messages m
		JOIN threads t ON t.id = m.thread_id WHERE m.id = $1 AND t.owner_id = $2`, id, user)
	if err != nil {
		return Message{}, err
	}
	m, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Message])
	return m, mapErr(err)
}

// Heartbeat records that an instance is alive.
func (d *DB) Heartbeat(ctx context.Context, instance string) error {
	_, err := d.q().Exec(ctx, `INSERT INTO instances (id) VALUES ($1)
		ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()`, instance)
	return err
}

// InterruptOrphanedRuns marks as interrupted every running or waiting run
// whose instance is restarting (self, at start-up: nothing of its old life
// survives) or has not sent a heartbeat for staleAfter. Their answers keep
// the text last flushed (the row's and its progress). It returns the runs it interrupted.
func (d *DB) InterruptOrphanedRuns(ctx context.Context, self string, staleAfter time.Duration) ([]Run, error) {
	var out []Run
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE runs SET status = 'interrupted', finished_at = now(),
				error = 'The server stopped while this answer was being written.'
			WHERE (status = 'running' OR (status = 'waiting' AND parent_run_id IS NOT NULL)) AND (instance_id = $1 OR NOT EXISTS (
				SELECT 1 FROM instances i WHERE i.id = runs.instance_id AND i.heartbeat_at > now() - make_interval(secs => $2)))
			RETURNING `+runCols, self, staleAfter.Seconds())
		if err != nil {
			return err
		}
		if out, err = pgx.CollectRows(rows, pgx.RowToStructByName[Run]); err != nil {
			return err
		}
		for _, r := range out {
			if r.ParentRunID != nil {
				// A sub-agent waiting for its user dies with its parent:
				// nothing will take its approval or question any more.
				if _, err := tx.Exec(ctx, `UPDATE run_steps SET status = 'cancelled', updated_at = now()
					WHERE run_id = $1 AND status = 'pending'`, r.ID); err != nil {
					return err
				}
			}
			if r.AssistantMessageID == nil {
				continue
			}
			// The answer keeps its text: the row's, then the progress
			// flushed after it.
			if _, err := tx.Exec(ctx, `UPDATE messages m SET status = 'interrupted', error = $2, updated_at = now(),
					content = m.content || COALESCE(p.c, ''),
					metadata = CASE WHEN p.t IS NULL THEN m.metadata ELSE jsonb_set(m.metadata, '{thinking}', to_jsonb(p.t)) END
				FROM `+progressText+` p
				WHERE m.id = $1 AND m.status = 'streaming'`, *r.AssistantMessageID, r.Error); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "DELETE FROM message_progress WHERE message_id = $1", *r.AssistantMessageID); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		ids := make([]int64, len(out))
		for i, r := range out {
			ids[i] = r.ID
		}
		d.notifyAfter(ctx, NoteEnd, ids)
	}
	return out, err
}

func prefixed(p, cols string) string {
	out := ""
	for i, c := range splitCols(cols) {
		if i > 0 {
			out += ", "
		}
		out += p + c
	}
	return out
}

// Followed is what a follower on another instance reads of a streaming
// answer: the progress rows after the last it has, and what tells it that
// the text was restarted under it.
type Followed struct {
	Status  string // the message's (not streaming: read it whole)
	Base    string // the row's own text (only when read from the start)
	BaseLen int    // its length in bytes
	First   int    // the lowest seq of its progress rows (-1: none)
	Rows    []Progress
}

// ProgressAfter reads one of the user's messages as a follower does: its
// progress rows with seq > after in order (after < 0: all of them, with
// the row's own text), in one statement.
func (d *DB) ProgressAfter(ctx context.Context, user, msg int64, after int) (Followed, error) {
	rows, err := d.q().Query(ctx, `SELECT m.status, CASE WHEN $3 < 0 THEN m.content ELSE '' END, octet_length(m.content),
			COALESCE(f.first, -1), p.seq, p.content, p.thinking
		FROM messages m JOIN threads t ON t.id = m.thread_id
		CROSS JOIN LATERAL (SELECT min(seq) AS first FROM message_progress WHERE message_id = m.id) f
		LEFT JOIN message_progress p ON p.message_id = m.id AND p.seq > $3
		WHERE m.id = $1 AND t.owner_id = $2 ORDER BY p.seq`, msg, user, after)
	if err != nil {
		return Followed{}, err
	}
	var out Followed
	found := false
	var seq *int32
	var content, thinking *string
	_, err = pgx.ForEachRow(rows, []any{&out.Status, &out.Base, &out.BaseLen, &out.First, &seq, &content, &thinking}, func() error {
		found = true
		if seq != nil {
			out.Rows = append(out.Rows, Progress{Message: msg, Seq: int(*seq), Content: *content, Thinking: *thinking})
		}
		return nil
	})
	if err != nil {
		return Followed{}, err
	}
	if !found {
		return Followed{}, ErrNotFound
	}
	return out, nil
}
