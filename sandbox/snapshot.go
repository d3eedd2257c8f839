package sandbox

import (
	"container/heap"
	"context"
	"errors"
	"io/fs"
	"os"
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
// systems mounted below it) in the order of filepath.WalkDir and records
// up to max files and links. Folders count towards max too, and the walk
// reads at most maxReadFactor × max names in all, keeping only the first
// names of a folder in memory: a command can make millions of entries in
// a minute (empty files at ~40,000 a second, folders at ~30,000 here), and
// the server must neither walk them all twice for every command nor hold
// a folder's whole listing. It goes through an *os.Root, one open folder
// per level down to maxDepth: a link swapped in for a folder during the
// walk leads nowhere outside.
func Take(ctx context.Context, root string, max int) (Snapshot, error) {
	w := walker{ctx: ctx, s: Snapshot{files: map[string]entry{}}, max: max, reads: maxReadFactor * max}
	r, err := os.OpenRoot(root)
	if err != nil {
		return w.s, err
	}
	defer r.Close()
	st, err := r.Lstat(".")
	if err != nil {
		return w.s, err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		w.dev = uint64(sys.Dev)
	}
	if err := w.dir(r, "", 0); err != nil && !errors.Is(err, errStop) {
		return w.s, err
	}
	return w.s, nil
}

const (
	// maxReadFactor bounds the names a walk reads, in multiples of max.
	maxReadFactor = 4
	// maxDepth is how deep a walk goes; past it the changes are not all
	// known.
	maxDepth = 128
	// beforeAll, as Snapshot.last, is a walk that stopped in the root
	// itself: no path is walkLess than it, so nothing is compared.
	beforeAll = "\x00"
)

var errStop = errors.New("the walk stopped at its cap")

type walker struct {
	ctx   context.Context
	s     Snapshot
	dev   uint64
	max   int // entries (files, links, folders) recorded or entered
	seen  int
	reads int // names left to read
}

// stop ends the walk at rel (a file, or a folder none of whose entries
// was recorded).
func (w *walker) stop(rel string) error {
	if rel == "" {
		rel = beforeAll
	}
	w.s.last = rel
	return errStop
}

// dir walks the folder d, at rel ("" for the root).
func (w *walker) dir(d *os.Root, rel string, depth int) error {
	names, err := w.names(d, rel)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		p := name
		if rel != "" {
			p = rel + "/" + name
		}
		if w.seen >= w.max {
			return w.stop(p)
		}
		info, err := d.Lstat(name)
		if err != nil {
			continue // vanished: not a file the command changed that we can know
		}
		w.seen++
		sys, _ := info.Sys().(*syscall.Stat_t)
		if info.IsDir() {
			if sys != nil && uint64(sys.Dev) != w.dev {
				continue
			}
			if depth+1 >= maxDepth {
				return w.stop(p)
			}
			sub, err := d.OpenRoot(name)
			if err != nil {
				continue
			}
			err = w.dir(sub, p, depth+1)
			sub.Close()
			if err != nil {
				return err
			}
			continue
		}
		e := entry{size: info.Size(), mtime: info.ModTime().UnixNano(), mode: info.Mode()}
		if sys != nil {
			e.ino = int64(sys.Ino)
			e.ctime = sys.Ctim.Nano()
		}
		w.s.files[p] = e
	}
	return nil
}

// names is the first names of the folder d, sorted — as many as the walk
// can still record, and one more (where it stops) — reading at most the
// names the walk has left.
func (w *walker) names(d *os.Root, rel string) ([]string, error) {
	f, err := d.Open(".")
	if err != nil {
		if rel == "" {
			return nil, err
		}
		return nil, nil // unreadable: not a file the command changed that we can know
	}
	defer f.Close()
	keep := w.max - w.seen + 1
	var h nameHeap
	for {
		batch, err := f.Readdirnames(1024)
		w.reads -= len(batch)
		if w.reads < 0 {
			return nil, w.stop(rel)
		}
		for _, n := range batch {
			switch {
			case len(h) < keep:
				heap.Push(&h, n)
			case n < h[0]:
				h[0] = n
				heap.Fix(&h, 0)
			}
		}
		if err != nil || len(batch) == 0 {
			break
		}
	}
	slices.Sort(h)
	return h, nil
}

// nameHeap keeps the smallest names: its top is the largest kept.
type nameHeap []string

func (h nameHeap) Len() int           { return len(h) }
func (h nameHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h nameHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *nameHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *nameHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
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
