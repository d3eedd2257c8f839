package sandbox

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"weft/db"
)

// entry is what a snapshot keeps of one file or symbolic link. ctime
// changes with every write, chmod, rename onto the path or touch — and no
// program can set it back — so comparing it (with the inode, size, mtime
// and mode) finds every change without reading a byte of content.
type entry struct {
	ino, size    int64
	mtime, ctime int64 // nanoseconds
	mode         fs.FileMode
}

// Snapshot is the state of a workspace's files at one moment.
type Snapshot struct {
	files map[string]entry // slash-separated paths relative to the root
	// last is the last path walked when the walk stopped at the cap
	// ("" when it saw everything).
	last string
}

// Complete reports whether the snapshot saw every file.
func (s Snapshot) Complete() bool { return s.last == "" }

// Take walks root (not following symbolic links, not entering other file
// systems mounted below it) and records up to max files and links.
func Take(ctx context.Context, root string, max int) (Snapshot, error) {
	s := Snapshot{files: map[string]entry{}}
	var dev uint64
	if st, err := os.Stat(root); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			dev = uint64(sys.Dev)
		}
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			return nil // vanished or unreadable: not a file the command changed that we can know
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return nil
		}
		sys, _ := info.Sys().(*syscall.Stat_t)
		if d.IsDir() {
			if path != root && sys != nil && uint64(sys.Dev) != dev {
				return filepath.SkipDir
			}
			return nil
		}
		if len(s.files) >= max {
			s.last = rel
			return filepath.SkipAll
		}
		e := entry{size: info.Size(), mtime: info.ModTime().UnixNano(), mode: info.Mode()}
		if sys != nil {
			e.ino = int64(sys.Ino)
			e.ctime = sys.Ctim.Nano()
		}
		s.files[rel] = e
		return nil
	})
	return s, err
}

// Diff lists the files created, modified and deleted from before to
// after, sorted by path. When a snapshot stopped at its cap, only paths up
// to where both walks reached are compared, and complete is false.
func Diff(before, after Snapshot) (changes []db.FileChange, complete bool) {
	limit := ""
	switch {
	case before.last == "":
		limit = after.last
	case after.last == "" || walkLess(before.last, after.last):
		limit = before.last
	default:
		limit = after.last
	}
	in := func(p string) bool { return limit == "" || walkLess(p, limit) }
	for p, b := range before.files {
		if !in(p) {
			continue
		}
		a, ok := after.files[p]
		switch {
		case !ok:
			changes = append(changes, db.FileChange{Path: p, Op: "deleted"})
		case a != b:
			changes = append(changes, db.FileChange{Path: p, Op: "modified"})
		}
	}
	for p := range after.files {
		if _, ok := before.files[p]; !ok && in(p) {
			changes = append(changes, db.FileChange{Path: p, Op: "created"})
		}
	}
	sortChanges(changes)
	return changes, limit == ""
}

// walkLess orders paths as filepath.WalkDir visits them: component by
// component, each directory's entries by name.
func walkLess(a, b string) bool {
	for {
		ha, ra, _ := strings.Cut(a, "/")
		hb, rb, _ := strings.Cut(b, "/")
		if ha != hb {
			return ha < hb
		}
		if ra == "" || rb == "" {
			return ra == "" && rb != ""
		}
		a, b = ra, rb
	}
}

func sortChanges(c []db.FileChange) {
	slices.SortFunc(c, func(x, y db.FileChange) int {
		switch {
		case walkLess(x.Path, y.Path):
			return -1
		case walkLess(y.Path, x.Path):
			return 1
		}
		return 0
	})
}
