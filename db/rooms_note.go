package db

import "context"

// NoteThreadChanged tells every instance that a thread's messages changed,
// or, of a room's thread, the room's members, agents or settings ("m
// <thread id>" on RunChannel), in the transaction q of the write.
//
// TEMPORARY (i20-manage): the stream helper's branch defines this function
// in notify.go with the same signature; this file goes when that lands.
func NoteThreadChanged(ctx context.Context, q querier, thread int64) error {
	_, err := q.Exec(ctx, "SELECT pg_notify($1, $2)", RunChannel, notePayload('m', thread))
	return err
}
