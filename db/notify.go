package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// RunChannel is the LISTEN/NOTIFY channel on which instances tell each other
// about runs. Payloads are tiny ("p 12": run 12 saved progress; the text
// itself is read from the rows), sent right after the commit of the
// transaction that wrote the change (db.InTx's noteTx; or in it), so a
// listener never hears of data it cannot read yet.
const RunChannel = "weft_run"

// Notes on RunChannel: the kind letter, a space, a run or user id.
const (
	NoteProgress = 'p' // run: progress rows saved (or the text restarted), of a run followed elsewhere
	NoteStarted  = 'r' // run: a queued run started
	NoteStop     = 's' // run: Stop was asked for
	NoteEnd      = 'e' // run: it ended (its final message is stored)
	NoteFollow   = 'f' // run: someone follows it from another instance
	NoteQueued   = 'q' // user: has queued runs that may start now
	NoteStepped  = 't' // run: a step was added from outside the run (a /steer), read its steps
	NoteThread   = 'c' // thread: its messages or (of a room) its members, agents or settings changed; re-read
)

// Note is one notification on RunChannel.
type Note struct {
	Kind byte
	ID   int64
}

// ParseNote reads a payload of RunChannel (ok false: not one of ours).
func ParseNote(payload string) (Note, bool) {
	k, id, found := strings.Cut(payload, " ")
	if !found || len(k) != 1 {
		return Note{}, false
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return Note{}, false
	}
	return Note{Kind: k[0], ID: n}, true
}

func notePayload(kind byte, id int64) string { return string(kind) + " " + strconv.FormatInt(id, 10) }

// Notify sends one note on RunChannel at once (outside any transaction).
func (d *DB) Notify(ctx context.Context, kind byte, id int64) error {
	_, err := d.q().Exec(ctx, "SELECT pg_notify($1, $2)", RunChannel, notePayload(kind, id))
	return err
}

// NoteThreadChanged tells every instance that thread's messages changed
// (added, removed, or its active branch moved), or, of a room's thread, the
// room's members, agents or settings: its watchers (chat.Runtime.WatchThread:
// the room's event streams, a thread page's live watch) read it again. q is
// the transaction of the write (InTx's: the note goes right after its
// commit, never before its data can be read) or, right after a commit, the
// pool.
func NoteThreadChanged(ctx context.Context, q querier, thread int64) error {
	if nt, ok := q.(*noteTx); ok {
		nt.notes = append(nt.notes, notePayload(NoteThread, thread))
		return nil
	}
	_, err := q.Exec(ctx, "SELECT pg_notify($1, $2)", RunChannel, notePayload(NoteThread, thread))
	return err
}

// noteThreadAfter sends thread's change note after a write committed, best
// effort: a lost note costs its watchers a safety poll, never data.
func (d *DB) noteThreadAfter(ctx context.Context, thread int64) {
	d.sendNotes(ctx, []string{notePayload(NoteThread, thread)})
}

// notifyRuns sends one note of kind per id (none: nothing).
func notifyRuns(ctx context.Context, q querier, kind byte, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if nt, ok := q.(*noteTx); ok {
		nt.notes = appendNotes(nt.notes, kind, ids)
		return nil
	}
	_, err := q.Exec(ctx, `SELECT pg_notify($1, $2 || ' ' || r) FROM unnest($3::bigint[]) AS r`,
		RunChannel, string(kind), ids)
	return err
}

// notifyAfter sends notes after a commit, best effort: a lost note costs
// its listeners a safety poll, never data.
func (d *DB) notifyAfter(ctx context.Context, kind byte, ids []int64) {
	d.sendNotes(ctx, appendNotes(nil, kind, ids))
}

// appendNotes appends one payload of kind per id.
func appendNotes(notes []string, kind byte, ids []int64) []string {
	for _, id := range ids {
		notes = append(notes, notePayload(kind, id))
	}
	return notes
}

// Listen holds one connection of its own (not the pool's) listening on
// RunChannel and calls note for every notification, in order, from one
// goroutine (note must not block for long). After every (re)connection,
// before any note of it, connected is called: whatever a caller learns
// through notes it must then read once from the tables, since notes sent
// while no connection listened are lost. A broken connection is opened
// again with a backoff from 50 ms to 5 s. Listen returns when ctx ends.
func (d *DB) Listen(ctx context.Context, connected func(), note func(Note)) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := d.listenOnce(ctx, connected, note, func() { backoff = 50 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		slog.Warn("listen for run notes; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (d *DB) listenOnce(ctx context.Context, connected func(), note func(Note), ok func()) error {
	conn, err := pgx.ConnectConfig(ctx, d.Pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+RunChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ok()
	connected()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return err
			}
			return fmt.Errorf("wait: %w", err)
		}
		if nt, valid := ParseNote(n.Payload); valid {
			note(nt)
		}
	}
}
