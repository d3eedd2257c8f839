package media

import (
	"io"
	"io/fs"
	"time"
)

// BlobStore is where stored files live, by the SHA-256 of their content: a
// local directory (Blobs, WEFT_DATA_DIR/blobs) or an S3-compatible bucket
// (S3Blobs), which every instance of a deployment can share. Which blobs
// are still referenced is not its business: the collector walks them
// (Walk) and asks the database.
type BlobStore interface {
	// Put stores data and returns its SHA-256 in hex. Storing the same
	// content again refreshes its modification time, so that a collector
	// sparing recent blobs spares a re-uploaded one too.
	Put(data []byte) (sha string, err error)
	// Open opens a stored blob; a missing one gives an error wrapping
	// fs.ErrNotExist, a name that is not a hash ErrInvalidSHA.
	Open(sha string) (BlobFile, error)
	// Read returns a stored blob's content (errors as Open).
	Read(sha string) ([]byte, error)
	// Remove deletes a stored blob; one already gone is not an error.
	Remove(sha string) error
	// Walk calls fn for every stored blob, in hash order; an error from fn
	// stops the walk and is returned.
	Walk(fn func(sha string, size int64, mod time.Time) error) error
	// CleanTemp removes what interrupted writes left behind, older than
	// olderThan, and says how many it removed.
	CleanTemp(olderThan time.Duration) (int, error)
}

// BlobFile is an opened blob: readable, seekable (for range requests) and
// with its size and modification time from Stat.
type BlobFile interface {
	io.ReadSeekCloser
	Stat() (fs.FileInfo, error)
}

var _ BlobStore = (*Blobs)(nil)
