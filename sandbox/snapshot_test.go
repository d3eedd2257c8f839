package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"weft/agent"
)

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func changesString(c []agent.Change) string {
	var parts []string
	for _, x := range c {
		parts = append(parts, x.Op+" "+x.Path)
	}
	return strings.Join(parts, ", ")
}

// The tool's files changed come from the workspace itself: a rewrite that
// keeps the size and puts the old mtime back is still a modification.
func TestRunCommandReportsTheFilesTheShellCreatedModifiedAndDeleted(t *testing.T) {
	s := newSandbox(t, Config{})
	ws := t.TempDir()
	write(t, ws, map[string]string{"keep.txt": "same", "a.txt": "aaaa\n", "gone.txt": "x", "dir/old.txt": "o"})
	tool := NewProvider(s).Tools()[0]
	if tool.Unavailable != "" || tool.Class != agent.ClassExec {
		t.Fatalf("the tool: %+v", tool)
	}
	res, err := tool.Run(context.Background(), &agent.Env{Root: ws}, agent.Args{"command": `
cp -p a.txt /tmp/ref && echo bbbb > a.txt && touch -r /tmp/ref a.txt
rm gone.txt dir/old.txt
mkdir -p sub && echo e > sub/e.txt
ln -s /etc/passwd sym
echo hello; echo warn >&2; exit 3`})
	if err != nil {
		t.Fatal(err)
	}
	want := "modified a.txt, deleted dir/old.txt, deleted gone.txt, created sub/e.txt, created sym"
	if got := changesString(res.Changes); got != want {
		t.Fatalf("changes %q, want %q", got, want)
	}
	for _, line := range []string{"Exit status: 3", "stdout (6 bytes):\nhello\n", "stderr (5 bytes):\nwarn\n", "  created sub/e.txt\n", "  modified a.txt\n"} {
		if !strings.Contains(res.Output, line) {
			t.Fatalf("the result lacks %q:\n%s", line, res.Output)
		}
	}
	res, err = tool.Run(context.Background(), &agent.Env{Root: ws}, agent.Args{"command": "cat keep.txt"})
	if err != nil || len(res.Changes) != 0 || !strings.Contains(res.Output, "Files changed: none") {
		t.Fatalf("a reading command changed files: %+v %v", res, err)
	}
}

func TestASnapshotPastItsCapComparesOnlyWhatBothWalksSaw(t *testing.T) {
	ws := t.TempDir()
	for i := range 10 {
		write(t, ws, map[string]string{fmt.Sprintf("f%d.txt", i): "x"})
	}
	ctx := context.Background()
	before, err := Take(ctx, ws, 5)
	if err != nil || before.Complete() {
		t.Fatalf("a walk of 10 files capped at 5 is complete: %v", err)
	}
	// A file created early in walk order pushes f4 out of the second walk;
	// that must not read as f4 deleted.
	write(t, ws, map[string]string{"a.txt": "new", "f1.txt": "changed", "f9.txt": "changed too"})
	after, _ := Take(ctx, ws, 5)
	changes, complete := Diff(before, after)
	if got := changesString(changes); complete || got != "created a.txt, modified f1.txt" {
		t.Fatalf("changes %q complete %v", got, complete)
	}
	full, _ := Take(ctx, ws, 100)
	all, _ := Take(ctx, ws, 100)
	if c, complete := Diff(full, all); len(c) != 0 || !complete {
		t.Fatalf("two walks of an unchanged workspace differ: %v", c)
	}
	if !walkLess("a/x", "a.txt") || walkLess("a.txt", "a/x") || !walkLess("a", "a/b") || walkLess("b", "a/z") {
		t.Fatal("walkLess does not follow WalkDir's order")
	}
}

// A command can make millions of folders and files in its minute: the
// walks before and after every later command must stay bounded — folders
// count towards the cap, and a folder's listing is not held whole.
func TestTheWalkOfAWorkspaceFullOfFoldersOrFilesStaysBounded(t *testing.T) {
	s := newSandbox(t, Config{MaxFiles: 100})
	ws := t.TempDir()
	tool := NewProvider(s).Tools()[0]
	res, err := tool.Run(context.Background(), &agent.Env{Root: ws}, agent.Args{"command": `mkdir d && cd d && seq 3000 | xargs mkdir && cd .. && echo x > z.txt`})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Output, "too large to compare whole") {
		t.Fatalf("3,000 folders were walked past a cap of 100:\n%s", res.Output)
	}
	if _, err := tool.Run(context.Background(), &agent.Env{Root: ws}, agent.Args{"command": `rm -r d && mkdir f && cd f && seq 10000 | xargs touch`}); err != nil {
		t.Fatal(err)
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	snap, err := Take(context.Background(), ws, 100)
	runtime.ReadMemStats(&m1)
	if err != nil || snap.Complete() {
		t.Fatalf("a walk of 10,000 files capped at 100: complete %v, %v", snap.Complete(), err)
	}
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 512<<10 {
		t.Fatalf("a walk capped at 100 entries allocated %d bytes for a folder of 10,000", alloc)
	}
}

func TestAWalkGoesThroughDeepFoldersAndStopsPastItsDepth(t *testing.T) {
	ws := t.TempDir()
	deep := ws
	for range maxDepth + 10 {
		deep = filepath.Join(deep, "d")
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, ws, map[string]string{"a.txt": "x"})
	snap, err := Take(context.Background(), ws, 1000)
	if err != nil || snap.Complete() || len(snap.files) != 1 {
		t.Fatalf("a walk of folders %d deep: complete %v, %d files, %v", maxDepth+10, snap.Complete(), len(snap.files), err)
	}
	write(t, ws, map[string]string{"b.txt": "x", "d/d/c.txt": "x"})
	after, _ := Take(context.Background(), ws, 1000)
	if c, complete := Diff(snap, after); complete || changesString(c) != "created b.txt, created d/d/c.txt" {
		t.Fatalf("changes %q, complete %v", changesString(c), complete)
	}
}
