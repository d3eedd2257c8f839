package db

import "context"

// MigrateUpTo applies the migrations up to version last, for tests of a
// migration over the data of an older schema.
func MigrateUpTo(ctx context.Context, d *DB, last int) ([]int, error) { return d.migrate(ctx, last) }

// SharedAttachmentSQL and SharedMediaSQL are the queries of SharedAttachment
// and SharedMedia, for a test of their plans.
var SharedAttachmentSQL, SharedMediaSQL = sharedAttachmentSQL, sharedMediaSQL
