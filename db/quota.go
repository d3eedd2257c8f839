package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"weft/internal/usererr"
)

// ErrStorageLimit is returned when storing would take a user over their
// storage limit.
var ErrStorageLimit = errors.New("db: storage limit reached")

// StorageLimitMessage is what the user is told when ErrStorageLimit refused
// a file, with their limit of max bytes. Attachments and knowledge-base
// documents share the one quota, so both refusals say the same.
func StorageLimitMessage(max int64) string {
	return fmt.Sprintf("your files on this server would go over your storage limit of %s. Delete threads with files you no longer need, or documents from your knowledge bases, to make room.", usererr.Size(max))
}

// storedBytesSQL is what a user stores: each distinct attachment file once
// (a file sent again, or carried over to an edited message, is stored
// once), plus the bytes of their knowledge-base documents.
const storedBytesSQL = `SELECT
	COALESCE((SELECT sum(size) FROM (SELECT DISTINCT ON (sha256) size FROM attachments WHERE owner_id = $1) a), 0) +
	COALESCE((SELECT sum(octet_length(f.data)) FROM kb_documents d JOIN kb_document_files f ON f.document_id = d.id
		WHERE d.owner_id = $1), 0)`

func storedBytes(ctx context.Context, q querier, user int64) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, storedBytesSQL, user).Scan(&n)
	return n, err
}

// StorageUse returns how many bytes the user stores and which of the given
// file hashes their attachments already hold (storing those again costs
// nothing).
func (d *DB) StorageUse(ctx context.Context, user int64, shas []string) (used int64, held map[string]bool, err error) {
	if used, err = storedBytes(ctx, d.q(), user); err != nil {
		return 0, nil, err
	}
	held = map[string]bool{}
	if len(shas) == 0 {
		return used, held, nil
	}
	rows, err := d.q().Query(ctx, "SELECT DISTINCT sha256 FROM attachments WHERE owner_id = $1 AND sha256 = ANY($2)", user, shas)
	if err != nil {
		return 0, nil, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, nil, err
	}
	for _, s := range list {
		held[s] = true
	}
	return used, held, nil
}
