package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
