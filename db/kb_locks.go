package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// The order in which a transaction locks a knowledge base's rows, so that
// two of them never wait for each other in a circle (a deadlock, 40P01):
//
//  1. the knowledge_bases row, first and in the strongest mode the
//     transaction needs (a weaker lock raised later would deadlock with
//     another holding the same weaker one):
//     - FOR SHARE (kbShare) to add or remove chunks and nothing else;
//     - FOR NO KEY UPDATE (kbWrite) to change its word counts (kb_lexemes)
//     or the row itself (chunks, language); writers of one knowledge base
//     take turns;
//     - FOR UPDATE to delete it or move it to another generation;
//  2. then kb_documents rows (FOR UPDATE),
//  3. then kb_chunks,
//  4. then kb_lexemes.
//
// A language switch (SwitchLanguage) holds kbWrite while it re-indexes
// every chunk and recounts every word: anything that would touch them
// waits for it before it has locked anything else, and it never waits for
// a document. Foreign-key checks take only FOR KEY SHARE, which none of
// these modes but FOR UPDATE blocks.
const (
	kbShare = "SHARE"
	kbWrite = "NO KEY UPDATE"
)

// lockKB locks a knowledge base's row in mode (kbShare, kbWrite).
// pgx.ErrNoRows: it does not exist.
func lockKB(ctx context.Context, tx pgx.Tx, kb int64, mode string) error {
	var ok bool
	return tx.QueryRow(ctx, "SELECT true FROM knowledge_bases WHERE id = $1 FOR "+mode, kb).Scan(&ok)
}

// lockDocKB locks in mode the row of the knowledge base a document belongs
// to, before the document itself is locked, and returns the knowledge
// base's id. owner > 0 requires the document to be that user's.
// pgx.ErrNoRows: no such document.
func lockDocKB(ctx context.Context, tx pgx.Tx, doc, owner int64, mode string) (int64, error) {
	var kb int64
	err := tx.QueryRow(ctx, `SELECT k.id FROM kb_documents d JOIN knowledge_bases k ON k.id = d.kb_id
		WHERE d.id = $1 AND ($2::bigint = 0 OR d.owner_id = $2) FOR `+mode+` OF k`, doc, owner).Scan(&kb)
	return kb, err
}

// noRowsIsNil is err, but nil for pgx.ErrNoRows.
func noRowsIsNil(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}
