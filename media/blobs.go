package media

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// ErrInvalidSHA is returned for a blob name that is not 64 lowercase hex
// digits; such a name never becomes a path.
var ErrInvalidSHA = errors.New("invalid blob hash")

// Blobs is the local BlobStore: files by the SHA-256 of their content
// under Dir (in Weft, WEFT_DATA_DIR/blobs): Dir/ab/ab12…ef, with writes
// going through Dir/tmp so that a blob either exists whole or not at all.
// Directories are 0700 and files 0600.
type Blobs struct {
	Dir string
}

const tmpDir = "tmp"

// Put stores data and returns its SHA-256 in hex. Storing the same content
// again writes nothing but refreshes the blob's modification time, so that
// a collector sparing recent blobs spares a re-uploaded one too.
func (b *Blobs) Put(data []byte) (sha string, err error) {
	if b.Dir == "" {
		return "", errors.New("media: blob directory not set")
	}
	sum := sha256.Sum256(data)
	sha = hex.EncodeToString(sum[:])
	final := b.path(sha)
	if fi, err := os.Stat(final); err == nil && fi.Mode().IsRegular() && fi.Size() == int64(len(data)) {
		now := time.Now()
		if err := os.Chtimes(final, now, now); err != nil {
			return "", fmt.Errorf("media: touch blob: %w", err)
		}
		return sha, nil
	}
	tmp := filepath.Join(b.Dir, tmpDir)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return "", fmt.Errorf("media: blob directory: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return "", fmt.Errorf("media: blob directory: %w", err)
	}
	f, err := os.CreateTemp(tmp, sha[:8]+"-*") // created 0600
	if err != nil {
		return "", fmt.Errorf("media: create blob: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return "", fmt.Errorf("media: write blob: %w", err)
	}
	if err = f.Sync(); err != nil {
		return "", fmt.Errorf("media: write blob: %w", err)
	}
	if err = f.Close(); err != nil {
		return "", fmt.Errorf("media: write blob: %w", err)
	}
	if err = os.Rename(f.Name(), final); err != nil {
		return "", fmt.Errorf("media: store blob: %w", err)
	}
	return sha, nil
}

// Open opens a stored blob; a missing one gives an error wrapping
// fs.ErrNotExist.
func (b *Blobs) Open(sha string) (BlobFile, error) {
	if !validSHA(sha) {
		return nil, ErrInvalidSHA
	}
	f, err := os.Open(b.path(sha))
	if err != nil {
		return nil, err // a nil *os.File in a BlobFile would not be nil
	}
	return f, nil
}

// Read returns a stored blob's content; a missing one gives an error
// wrapping fs.ErrNotExist.
func (b *Blobs) Read(sha string) ([]byte, error) {
	if !validSHA(sha) {
		return nil, ErrInvalidSHA
	}
	return os.ReadFile(b.path(sha))
}

// Remove deletes a stored blob; one already gone is not an error.
func (b *Blobs) Remove(sha string) error {
	if !validSHA(sha) {
		return ErrInvalidSHA
	}
	if err := os.Remove(b.path(sha)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("media: remove blob: %w", err)
	}
	return nil
}

// Walk calls fn for every stored blob, in hash order, skipping the temp
// directory and any name that is not a blob. An error from fn stops the
// walk and is returned. A Dir that does not exist holds no blobs.
func (b *Blobs) Walk(fn func(sha string, size int64, mod time.Time) error) error {
	shards, err := os.ReadDir(b.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("media: list blobs: %w", err)
	}
	for _, shard := range shards {
		if !shard.IsDir() || len(shard.Name()) != 2 || !isLowerHex(shard.Name()) {
			continue
		}
		files, err := os.ReadDir(filepath.Join(b.Dir, shard.Name()))
		if err != nil {
			return fmt.Errorf("media: list blobs: %w", err)
		}
		for _, f := range files {
			sha := f.Name()
			if !f.Type().IsRegular() || !validSHA(sha) || sha[:2] != shard.Name() {
				continue
			}
			fi, err := f.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed meanwhile
			}
			if err != nil {
				return fmt.Errorf("media: list blobs: %w", err)
			}
			if err := fn(sha, fi.Size(), fi.ModTime()); err != nil {
				return err
			}
		}
	}
	return nil
}

// CleanTemp removes the temp files of writes that were interrupted (a
// crash between create and rename) and are older than olderThan, and
// says how many it removed. Writes in progress are younger than any
// sensible olderThan (an hour, say).
func (b *Blobs) CleanTemp(olderThan time.Duration) (int, error) {
	dir := filepath.Join(b.Dir, tmpDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("media: list temp blobs: %w", err)
	}
	cutoff := time.Now().Add(-olderThan)
	n := 0
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("media: remove temp blob: %w", err)
		}
		n++
	}
	return n, nil
}

func (b *Blobs) path(sha string) string {
	return filepath.Join(b.Dir, sha[:2], sha)
}

func validSHA(s string) bool { return len(s) == sha256.Size*2 && isLowerHex(s) }

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
