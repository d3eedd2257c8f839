package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

const outsideSecret = "outside secret\n"

// fileFixture is a workspace and, next to it, a directory the file tools
// must never reach.
type fileFixture struct {
	env     *Env
	base    string // parent of both; no error text may contain it
	ws      string
	outside string
}

func setupFiles(t *testing.T) fileFixture {
	t.Helper()
	base := t.TempDir()
	f := fileFixture{base: base, ws: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside")}
	for _, dir := range []string{f.ws, f.outside} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.outside, "secret.txt"), []byte(outsideSecret), 0o644); err != nil {
		t.Fatal(err)
	}
	f.env = &Env{Root: f.ws}
	return f
}

// write creates a file of the workspace (parents included) for a test.
func (f fileFixture) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(f.ws, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f fileFixture) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.ws, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (f fileFixture) symlink(t *testing.T, target, rel string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(f.ws, filepath.FromSlash(rel))); err != nil {
		t.Skipf("symlinks not available: %v", err)
	}
}

func (f fileFixture) call(name string, args Args) (Result, error) {
	for _, tool := range FileTools() {
		if tool.Name == name {
			return tool.Run(context.Background(), f.env, args)
		}
	}
	return Result{}, fmt.Errorf("no tool %q", name)
}

// mustCall runs a tool that must succeed.
func (f fileFixture) mustCall(t *testing.T, name string, args Args) Result {
	t.Helper()
	res, err := f.call(name, args)
	if err != nil {
		t.Fatalf("%s(%v): %v", name, args, err)
	}
	return res
}

// toolError asserts err is a *ToolError that does not reveal where the
// workspace lives, and returns its text.
func (f fileFixture) toolError(t *testing.T, err error) string {
	t.Helper()
	var te *ToolError
	if !errors.As(err, &te) {
		t.Fatalf("error = %v (%T), want a *ToolError", err, err)
	}
	if strings.Contains(te.Msg, f.base) {
		t.Errorf("error %q reveals the absolute path %s", te.Msg, f.base)
	}
	return te.Msg
}

// wantToolError asserts the call failed with a *ToolError containing want.
func (f fileFixture) wantToolError(t *testing.T, err error, want string) {
	t.Helper()
	if msg := f.toolError(t, err); !strings.Contains(msg, want) {
		t.Errorf("error = %q, want it to contain %q", msg, want)
	}
}

// snapshot maps every path under dir to its content (or "<dir>"/"<link>").
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			m[rel] = "<link>"
		case d.IsDir():
			m[rel] = "<dir>"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (f fileFixture) assertOutsideUntouched(t *testing.T, before map[string]string) {
	t.Helper()
	after := snapshot(t, f.outside)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("outside directory changed:\nbefore %v\nafter  %v", before, after)
	}
}

func TestFileToolsAreTheSixWorkspaceToolsWithTheirClasses(t *testing.T) {
	t.Parallel()
	want := map[string]Class{
		"list_files": ClassRead, "read_file": ClassRead, "search_files": ClassRead,
		"write_file": ClassWrite, "edit_file": ClassWrite, "delete_file": ClassWrite,
	}
	tools := FileTools()
	if len(tools) != len(want) {
		t.Fatalf("got %d tools, want %d", len(tools), len(want))
	}
	for _, tool := range tools {
		if c, ok := want[tool.Name]; !ok || c != tool.Class {
			t.Errorf("tool %s has class %q, want %q", tool.Name, tool.Class, c)
		}
		if tool.Run == nil || tool.Description == "" {
			t.Errorf("tool %s has no Run or no description", tool.Name)
		}
	}
}

// hostileCalls are the calls of every path-taking tool on p.
func hostileCalls(p string) map[string]Args {
	return map[string]Args{
		"list_files":   {"path": p, "recursive": true},
		"read_file":    {"path": p},
		"search_files": {"query": "secret", "path": p},
		"write_file":   {"path": p, "content": "pwned"},
		"edit_file":    {"path": p, "old_text": "secret", "new_text": "pwned"},
		"delete_file":  {"path": p},
	}
}

func TestConfineEveryToolRefusesPathsLeavingTheWorkspace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		path string
		// links are created in the workspace first: name → target, where
		// "OUTSIDE" is replaced by the outside directory.
		links map[string]string
		// skip lists tools for which the path names the link itself,
		// which is not a way out (delete_file deletes the link).
		skip []string
	}{
		{name: "parent", path: "../x"},
		{name: "parent of parent", path: "../../etc/passwd"},
		{name: "absolute", path: "/etc/passwd"},
		{name: "absolute to the outside file", path: "OUTSIDE/secret.txt"},
		{name: "dot-dot after a name", path: "a/../../x"},
		{name: "dot then parent", path: "./../x"},
		{name: "bare dot-dot", path: ".."},
		{name: "parent to the outside file", path: "../outside/secret.txt"},
		{name: "windows drive", path: `C:\Windows`},
		{name: "windows drive with slash", path: "c:/Windows"},
		{name: "windows UNC", path: `\\server\share`},
		{name: "NUL byte", path: "a\x00b"},
		{name: "too long", path: strings.Repeat("a/", 2100)},
		{
			name: "through a symlink to an outside directory", path: "out/secret.txt",
			links: map[string]string{"out": "OUTSIDE"},
		},
		{
			name: "a symlink to an outside directory itself", path: "out",
			links: map[string]string{"out": "OUTSIDE"}, skip: []string{"delete_file"},
		},
		{
			name: "through a symlink to the parent", path: "up/outside/secret.txt",
			links: map[string]string{"up": ".."},
		},
		{
			name: "a symlink to the parent itself", path: "up",
			links: map[string]string{"up": ".."}, skip: []string{"delete_file"},
		},
		{
			name: "an absolute symlink to an outside file", path: "abs",
			links: map[string]string{"abs": "OUTSIDE/secret.txt"}, skip: []string{"delete_file"},
		},
		{
			name: "a relative symlink to an outside file", path: "rel",
			links: map[string]string{"rel": "../outside/secret.txt"}, skip: []string{"delete_file"},
		},
		{
			name: "a chain of symlinks ending outside", path: "one/secret.txt",
			links: map[string]string{"one": "two", "two": "OUTSIDE"},
		},
	}
	for _, tt := range tests {
		for tool, args := range hostileCalls(tt.path) {
			if slices.Contains(tt.skip, tool) {
				continue
			}
			t.Run(tool+" refuses "+tt.name, func(t *testing.T) {
				t.Parallel()
				f := setupFiles(t)
				for name, target := range tt.links {
					f.symlink(t, strings.Replace(target, "OUTSIDE", f.outside, 1), name)
				}
				if p, ok := args["path"].(string); ok {
					args["path"] = strings.Replace(p, "OUTSIDE", f.outside, 1)
				}
				before := snapshot(t, f.outside)

				res, err := f.call(tool, args)

				msg := f.toolError(t, err)
				if tt.name != "NUL byte" && tt.name != "too long" && !strings.Contains(msg, "inside the workspace") &&
					!strings.Contains(msg, "symbolic link") {
					t.Errorf("error = %q, want it to say the path must stay inside the workspace", msg)
				}
				if res.Output != "" || len(res.Changes) > 0 || len(res.Sources) > 0 {
					t.Errorf("a refused call returned %+v", res)
				}
				f.assertOutsideUntouched(t, before)
			})
		}
	}
}

func TestConfineDeletingASymlinkToOutsideRemovesOnlyTheLink(t *testing.T) {
	t.Parallel()
	f := setupFiles(t)
	f.symlink(t, f.outside, "out")
	f.symlink(t, filepath.Join(f.outside, "secret.txt"), "abs")
	before := snapshot(t, f.outside)

	for _, p := range []string{"out", "abs"} {
		res := f.mustCall(t, "delete_file", Args{"path": p})
		if want := []Change{{Path: p, Op: OpDeleted}}; !slices.Equal(res.Changes, want) {
			t.Errorf("changes = %v, want %v", res.Changes, want)
		}
		if _, err := os.Lstat(filepath.Join(f.ws, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("link %s still there: %v", p, err)
		}
	}
	f.assertOutsideUntouched(t, before)
}

func TestConfineSymlinkSwappedInAfterACheckCannotEscape(t *testing.T) {
	t.Parallel()
	f := setupFiles(t)
	res := f.mustCall(t, "write_file", Args{"path": "d/f.txt", "content": "inside"})
	if want := []Change{{Path: "d/f.txt", Op: OpCreated}}; !slices.Equal(res.Changes, want) {
		t.Fatalf("changes = %v, want %v", res.Changes, want)
	}
	f.mustCall(t, "read_file", Args{"path": "d/f.txt"})

	// d was checked and used as a real directory; now it leads outside.
	if err := os.Rename(filepath.Join(f.ws, "d"), filepath.Join(f.ws, "d.real")); err != nil {
		t.Fatal(err)
	}
	f.symlink(t, f.outside, "d")
	before := snapshot(t, f.outside)

	calls := []struct {
		tool string
		args Args
	}{
		{"write_file", Args{"path": "d/f.txt", "content": "pwned"}},
		{"write_file", Args{"path": "d/secret.txt", "content": "pwned"}},
		{"write_file", Args{"path": "d/new/f.txt", "content": "pwned"}},
		{"read_file", Args{"path": "d/f.txt"}},
		{"read_file", Args{"path": "d/secret.txt"}},
		{"edit_file", Args{"path": "d/secret.txt", "old_text": "secret", "new_text": "pwned"}},
		{"delete_file", Args{"path": "d/f.txt"}},
		{"delete_file", Args{"path": "d/secret.txt"}},
		{"list_files", Args{"path": "d"}},
		{"search_files", Args{"query": "secret", "path": "d"}},
	}
	for _, c := range calls {
		res, err := f.call(c.tool, c.args)
		f.toolError(t, err)
		if strings.Contains(res.Output, "secret") {
			t.Errorf("%s(%v) read outside: %q", c.tool, c.args, res.Output)
		}
	}
	f.assertOutsideUntouched(t, before)
	if got := f.read(t, "d.real/f.txt"); got != "inside" {
		t.Errorf("the real directory's file = %q, want it unchanged", got)
	}
}

func TestConfineSymlinkFlippedConcurrentlyNeverLetsAWriteOut(t *testing.T) {
	t.Parallel()
	f := setupFiles(t)
	if err := os.Symlink(f.outside, filepath.Join(f.base, "probe")); err != nil {
		t.Skipf("symlinks not available: %v", err)
	}
	before := snapshot(t, f.outside)
	d, aside := filepath.Join(f.ws, "d"), filepath.Join(f.ws, "aside")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}

	// d is a real directory, then a symlink to outside, and so on. A write
	// may recreate d while it is missing, so each step clears what is in
	// the way; RemoveAll never follows a symlink.
	toOutside := func() {
		_ = os.RemoveAll(aside)
		if err := os.Rename(d, aside); err != nil {
			_ = os.RemoveAll(d)
		}
		_ = os.Symlink(f.outside, d)
	}
	toReal := func() {
		_ = os.Remove(d)
		if err := os.Rename(aside, d); err != nil {
			_ = os.Mkdir(d, 0o755)
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			toOutside()
			toReal()
		}
	})

	// Go on until both states were hit often enough that the test means
	// something, or give up after a bounded number of calls.
	var ok, refused int
	for i := 0; i < 5000 && (ok < 20 || refused < 20); i++ {
		name := fmt.Sprintf("d/f%d.txt", i)
		if _, err := f.call("write_file", Args{"path": name, "content": "x"}); err == nil {
			ok++
		} else {
			f.toolError(t, err)
			refused++
		}
		if res, err := f.call("read_file", Args{"path": "d/secret.txt"}); err == nil {
			t.Errorf("read_file through the flipping link read %q", res.Output)
		}
		if _, err := f.call("delete_file", Args{"path": "d/secret.txt"}); err == nil {
			t.Error("delete_file through the flipping link succeeded")
		}
	}
	stop.Store(true)
	wg.Wait()
	f.assertOutsideUntouched(t, before)
	if ok < 20 || refused < 20 {
		t.Errorf("the flips were not exercised: %d writes succeeded, %d refused", ok, refused)
	}
}

func TestListFilesListsTheWorkspaceTreeWithoutHiddenFolders(t *testing.T) {
	t.Parallel()
	f := setupFiles(t)
	f.write(t, "b.txt", "bbb")
	f.write(t, "a.txt", "a")
	f.write(t, "sub/c.txt", "cc")
	f.write(t, "sub/deep/d.txt", "dddd")
	f.write(t, ".git/HEAD", "ref")
	f.write(t, "empty/.keep", "")
	if err := os.Remove(filepath.Join(f.ws, "empty", ".keep")); err != nil {
		t.Fatal(err)
	}
	f.symlink(t, "sub", "link")
	f.symlink(t, f.outside, "out")

	tests := []struct {
		name string
		args Args
		want string
	}{
		{
			name: "lists the root sorted with kinds and sizes by default",
			args: Args{},
			want: "dir      .git/\nfile     a.txt  (1 bytes)\nfile     b.txt  (3 bytes)\ndir      empty/\n" +
				"symlink  link\nsymlink  out\ndir      sub/\n",
		},
		{
			name: "lists a subdirectory with workspace-relative paths",
			args: Args{"path": "./sub/"},
			want: "file     sub/c.txt  (2 bytes)\ndir      sub/deep/\n",
		},
		{
			name: "walks recursively without following symlinks or entering .git",
			args: Args{"recursive": true},
			want: "dir      .git/\nfile     a.txt  (1 bytes)\nfile     b.txt  (3 bytes)\ndir      empty/\n" +
				"symlink  link\nsymlink  out\ndir      sub/\nfile     sub/c.txt  (2 bytes)\n" +
				"dir      sub/deep/\nfile     sub/deep/d.txt  (4 bytes)\n",
		},
		{
			name: "says a directory is empty",
			args: Args{"path": "empty"},
			want: "(empty directory)\n",
		},
		{
			name: "lists through a symlink that stays inside",
			args: Args{"path": "link"},
			want: "file     link/c.txt  (2 bytes)\ndir      link/deep/\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := f.mustCall(t, "list_files", tt.args)
			if res.Output != tt.want {
				t.Errorf("output =\n%s\nwant\n%s", res.Output, tt.want)
			}
		})
	}

	errTests := []struct {
		name string
		args Args
		want string
	}{
		{"refuses a file", Args{"path": "a.txt"}, "not a directory: a.txt"},
		{"reports a missing directory by its relative path", Args{"path": "nope/x"}, "no such file: nope/x"},
		{"refuses a non-boolean recursive", Args{"recursive": "maybe"}, `"recursive" must be true or false`},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := f.call("list_files", tt.args)
			f.wantToolError(t, err, tt.want)
		})
	}
}

func TestFileListFilesStopsAt500Entries(t *testing.T) {
	t.Parallel()
	f := setupFiles(t)
	for i := range 260 {
		f.write(t, fmt.Sprintf("a/%03d.txt", i), "x")
		f.write(t, fmt.Sprintf("b/%03d.txt", i), "x")
	}
	for _, recursive := range []bool{false, true} {
		path := "a"
		if recursive {
			path = "."
		}
		res := f.mustCall(t, "list_files", Args{"path": path, "recursive": recursive})
		lines := strings.Split(strings.TrimSuffix(res.Output, "\n"), "\n")
		truncated := strings.HasPrefix(lines[len(lines)-1], "[truncated: listed the first 500 entries")
		switch {
		case recursive && (!truncated || len(lines) != 501):
			t.Errorf("recursive listing: %d lines, last %q; want 500 entries and a truncation note", len(lines), lines[len(lines)-1])
		case !recursive && (truncated || len(lines) != 260):
			t.Errorf("listing of a: %d lines, last %q; want 260 entries and no note", len(lines), lines[len(lines)-1])
		}
	}
	for i := 260; i < 501; i++ {
		f.write(t, fmt.Sprintf("a/%03d.txt", i), "x")
	}
	res := f.mustCall(t, "list_files", Args{"path": "a"})
	lines := strings.Split(strings.TrimSuffix(res.Output, "\n"), "\n")
	if len(lines) != 501 || !strings.Contains(lines[499], "a/499.txt") || !strings.HasPrefix(lines[500], "[truncated") {
		t.Errorf("listing of 501 files: %d lines, ends %q", len(lines), lines[len(lines)-2:])
	}
}

func TestReadFileReadsTextByLinesAndRefusesBinaryOrOversizedFiles(t *testing.T) {
	t.Parallel()
	f := setupFiles(t)
	f.write(t, "sub/five.txt", "one\ntwo\nthree\nfour\nfive\n")
	f.write(t, "nonl.txt", "a\nb")
	f.write(t, "empty.txt", "")
	f.write(t, "bin.dat", "text\x00more")
	f.write(t, "big.txt", strings.Repeat("0123456789abcdef\n", (maxFileBytes/17)+100))
	f.write(t, "wide.txt", strings.Repeat("x", 100<<10))
	f.write(t, "utf8.txt", strings.Repeat("é", 40<<10)) // 80 KiB of 2-byte runes

	tests := []struct {
		name string
		args Args
		want string
	}{
		{"reads a whole file", Args{"path": "sub/five.txt"}, "one\ntwo\nthree\nfour\nfive\n"},
		{"reads lines from offset for limit and says more follow", Args{"path": "sub/five.txt", "offset": 2, "limit": 2},
			"two\nthree\n[more lines follow; continue with offset=4]"},
		{"reads from offset to the end", Args{"path": "sub/five.txt", "offset": 4}, "four\nfive\n"},
		{"reads the first lines with limit alone", Args{"path": "sub/five.txt", "limit": 1},
			"one\n[more lines follow; continue with offset=2]"},
		{"reads a last line without a newline", Args{"path": "nonl.txt", "offset": 2}, "b"},
		{"says no more lines when the limit ends the file", Args{"path": "sub/five.txt", "offset": 4, "limit": 2}, "four\nfive\n"},
		{"says a file is empty", Args{"path": "empty.txt"}, "(empty file)"},
		{"reads a file over 1 MiB by lines", Args{"path": "big.txt", "offset": 3, "limit": 1},
			"0123456789abcdef\n[more lines follow; continue with offset=4]"},
		{"accepts JSON numbers as floats", Args{"path": "sub/five.txt", "offset": float64(5), "limit": float64(1)}, "five\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := f.mustCall(t, "read_file", tt.args)
			if res.Output != tt.want {
				t.Errorf("output = %q, want %q", res.Output, tt.want)
			}
		})
	}

	t.Run("cites the file by its cleaned relative path", func(t *testing.T) {
		t.Parallel()
		res := f.mustCall(t, "read_file", Args{"path": "./sub//x/../five.txt"})
		if want := []Source{{Kind: "file", Label: "sub/five.txt"}}; !slices.Equal(res.Sources, want) {
			t.Errorf("sources = %v, want %v", res.Sources, want)
		}
	})

	t.Run("caps the output at 64 KiB and counts the rest", func(t *testing.T) {
		t.Parallel()
		res := f.mustCall(t, "read_file", Args{"path": "wide.txt"})
		want := strings.Repeat("x", 64<<10) + "\n[truncated: 36864 more bytes]"
		if res.Output != want {
			t.Errorf("output is %d bytes ending %q", len(res.Output), res.Output[len(res.Output)-40:])
		}
	})

	t.Run("cuts the output on a whole character", func(t *testing.T) {
		t.Parallel()
		res := f.mustCall(t, "read_file", Args{"path": "utf8.txt"})
		want := strings.Repeat("é", 32<<10) + "\n[truncated: 16384 more bytes]"
		if res.Output != want {
			t.Errorf("output is %d bytes ending %q", len(res.Output), res.Output[len(res.Output)-40:])
		}
	})

	errTests := []struct {
		name string
		args Args
		want string
	}{
		{"refuses a binary file", Args{"path": "bin.dat"}, "bin.dat is a binary file"},
		{"refuses a whole read over 1 MiB", Args{"path": "big.txt"}, "over the 1 MiB limit"},
		{"refuses a directory", Args{"path": "sub"}, "sub is a directory"},
		{"refuses the root", Args{"path": "."}, "not the workspace root"},
		{"needs a path", Args{}, `missing argument "path"`},
		{"refuses an empty path", Args{"path": ""}, `missing argument "path"`},
		{"reports a missing file by its relative path", Args{"path": "sub/nope.txt"}, "no such file: sub/nope.txt"},
		{"reports a file used as a directory", Args{"path": "nonl.txt/x"}, "not a directory"},
		{"refuses an offset past the end", Args{"path": "sub/five.txt", "offset": 7}, "offset 7 is past the end of sub/five.txt (5 lines)"},
		{"refuses a negative limit", Args{"path": "sub/five.txt", "limit": -1}, "must not be negative"},
		{"refuses a fractional offset", Args{"path": "sub/five.txt", "offset": 1.5}, "whole number"},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := f.call("read_file", tt.args)
			f.wantToolError(t, err, tt.want)
		})
	}
}

func TestSearchFilesFindsTextCaseInsensitivelyAndSkipsBinaryHiddenAndOversizedFiles(t *testing.T) {
	t.Parallel()
	f := setupFiles(t)
	f.write(t, "a.go", "package a\n// TODO: fix Needle here\n")
	f.write(t, "sub/b.md", "intro\n\nneedle and NEEDLE\n")
	f.write(t, "sub/bin.dat", "needle\x00")
	f.write(t, "big.txt", "needle\n"+strings.Repeat("x", maxFileBytes))
	f.write(t, ".git/config", "needle")
	f.write(t, "other/c.txt", "nothing here\n")
	f.symlink(t, "a.go", "alias.go")
	f.symlink(t, f.outside, "out")

	tests := []struct {
		name string
		args Args
		want string
	}{
		{
			name: "finds a substring ignoring case, skipping binary, big, .git and symlinked files",
			args: Args{"query": "needle"},
			want: "a.go:2: // TODO: fix Needle here\nsub/b.md:3: needle and NEEDLE\n",
		},
		{
			name: "searches only under path",
			args: Args{"query": "NEEDLE", "path": "sub"},
			want: "sub/b.md:3: needle and NEEDLE\n",
		},
		{
			name: "searches a single file",
			args: Args{"query": "todo", "path": "a.go"},
			want: "a.go:2: // TODO: fix Needle here\n",
		},
		{
			name: "says when nothing matches",
			args: Args{"query": "needle", "path": "other"},
			want: `no matches for "needle" in other`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := f.mustCall(t, "search_files", tt.args)
			if res.Output != tt.want {
				t.Errorf("output =\n%s\nwant\n%s", res.Output, tt.want)
			}
		})
	}

	t.Run("cites each file with a match", func(t *testing.T) {
		t.Parallel()
		res := f.mustCall(t, "search_files", Args{"query": "needle"})
		want := []Source{{Kind: "file", Label: "a.go"}, {Kind: "file", Label: "sub/b.md"}}
		if !slices.Equal(res.Sources, want) {
			t.Errorf("sources = %v, want %v", res.Sources, want)
		}
	})

	errTests := []struct {
		name string
		args Args
		want string
	}{
		{"needs a query", Args{"path": "."}, `missing argument "query"`},
		{"refuses a blank query", Args{"query": "  "}, "query must not be empty"},
		{"reports a missing path", Args{"query": "x", "path": "nope"}, "no such file: nope"},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := f.call("search_files", tt.args)
			f.wantToolError(t, err, tt.want)
		})
	}
}

func TestFileSearchFilesCapsMatchesAndOutput(t *testing.T) {
	t.Parallel()
	f := setupFiles(t)
	f.write(t, "many.txt", strings.Repeat("hit\n", 250))
	f.write(t, "wide.txt", strings.Repeat("hit "+strings.Repeat("w", 1000)+"\n", 150))

	res := f.mustCall(t, "search_files", Args{"query": "HIT", "path": "many.txt"})
	lines := strings.Split(res.Output, "\n")
	if len(lines) != 201 || lines[199] != "many.txt:200: hit" || lines[200] != "[stopped after 200 matches; narrow the query or the path]" {
		t.Errorf("got %d lines ending %q", len(lines), lines[len(lines)-2:])
	}

	res = f.mustCall(t, "search_files", Args{"query": "hit", "path": "wide.txt"})
	if len(res.Output) > maxOutputBytes+100 || !strings.Contains(res.Output, "\n[truncated: ") {
		t.Errorf("output of %d bytes ends %q", len(res.Output), res.Output[max(0, len(res.Output)-60):])
	}
	if first, _, _ := strings.Cut(res.Output, "\n"); first != "wide.txt:1: hit "+strings.Repeat("w", 496)+"…" {
		t.Errorf("a long matching line is not cut to 500 bytes: %q", first)
	}
}

func TestWriteFileCreatesOrReplacesAFileAndReportsTheChange(t *testing.T) {
	t.Parallel()

	t.Run("creates a file with its parents then reports a modification", func(t *testing.T) {
		t.Parallel()
		f := setupFiles(t)
		res := f.mustCall(t, "write_file", Args{"path": "./new/dir//f.txt", "content": "one"})
		if want := []Change{{Path: "new/dir/f.txt", Op: OpCreated}}; !slices.Equal(res.Changes, want) {
			t.Errorf("changes = %v, want %v", res.Changes, want)
		}
		if res.Output != "wrote 3 bytes to new/dir/f.txt (created)" {
			t.Errorf("output = %q", res.Output)
		}
		res = f.mustCall(t, "write_file", Args{"path": "new/dir/f.txt", "content": "two!"})
		if want := []Change{{Path: "new/dir/f.txt", Op: OpModified}}; !slices.Equal(res.Changes, want) {
			t.Errorf("changes = %v, want %v", res.Changes, want)
		}
		if got := f.read(t, "new/dir/f.txt"); got != "two!" {
			t.Errorf("content = %q", got)
		}
		entries, err := os.ReadDir(filepath.Join(f.ws, "new", "dir"))
		if err != nil || len(entries) != 1 {
			t.Errorf("directory holds %v (%v), want only f.txt: no temporary file left", entries, err)
		}
	})

	t.Run("writes an empty file and keeps a file's permissions", func(t *testing.T) {
		t.Parallel()
		f := setupFiles(t)
		f.write(t, "run.sh", "#!/bin/sh\n")
		if err := os.Chmod(filepath.Join(f.ws, "run.sh"), 0o755); err != nil {
			t.Fatal(err)
		}
		f.mustCall(t, "write_file", Args{"path": "run.sh", "content": ""})
		fi, err := os.Stat(filepath.Join(f.ws, "run.sh"))
		if err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0o755 {
			t.Errorf("run.sh = %v, %v; want empty with mode 0755", fi, err)
		}
	})

	t.Run("accepts exactly 1 MiB", func(t *testing.T) {
		t.Parallel()
		f := setupFiles(t)
		f.mustCall(t, "write_file", Args{"path": "max.txt", "content": strings.Repeat("x", maxFileBytes)})
	})

	errTests := []struct {
		name  string
		setup func(t *testing.T, f fileFixture)
		args  Args
		want  string
	}{
		{name: "refuses content over 1 MiB", args: Args{"path": "f.txt", "content": strings.Repeat("x", maxFileBytes+1)},
			want: "over the 1 MiB limit"},
		{name: "needs content", args: Args{"path": "f.txt"}, want: `missing argument "content"`},
		{name: "refuses the root", args: Args{"path": "./", "content": "x"}, want: "not the workspace root"},
		{name: "refuses a directory", setup: func(t *testing.T, f fileFixture) { f.write(t, "d/x", "") },
			args: Args{"path": "d", "content": "x"}, want: "d is a directory"},
		{name: "refuses a path under a file", setup: func(t *testing.T, f fileFixture) { f.write(t, "f.txt", "") },
			args: Args{"path": "f.txt/g.txt", "content": "x"}, want: "not a directory"},
		{name: "refuses a read-only file", setup: func(t *testing.T, f fileFixture) {
			f.write(t, "ro.txt", "keep")
			if err := os.Chmod(filepath.Join(f.ws, "ro.txt"), 0o444); err != nil {
				t.Fatal(err)
			}
		}, args: Args{"path": "ro.txt", "content": "x"}, want: "ro.txt is read-only"},
		{name: "refuses to replace a symlink inside the workspace", setup: func(t *testing.T, f fileFixture) {
			f.write(t, "target.txt", "keep")
			f.symlink(t, "target.txt", "link.txt")
		}, args: Args{"path": "link.txt", "content": "x"}, want: "link.txt is a symbolic link"},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setupFiles(t)
			if tt.setup != nil {
				tt.setup(t, f)
			}
			before := snapshot(t, f.ws)
			_, err := f.call("write_file", tt.args)
			f.wantToolError(t, err, tt.want)
			if after := snapshot(t, f.ws); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("a refused write changed the workspace:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

func TestEditFileReplacesExactTextOnlyWhenTheMatchIsUnambiguous(t *testing.T) {
	t.Parallel()
	const start = "alpha beta\nbeta gamma\n"
	tests := []struct {
		name    string
		content string // default start
		args    Args
		want    string // content after; "" means unchanged
		wantErr string
	}{
		{name: "replaces a unique occurrence",
			args: Args{"old_text": "alpha", "new_text": "ALPHA"}, want: "ALPHA beta\nbeta gamma\n"},
		{name: "deletes text with an empty new_text",
			args: Args{"old_text": "alpha ", "new_text": ""}, want: "beta\nbeta gamma\n"},
		{name: "replaces every occurrence with replace_all",
			args: Args{"old_text": "beta", "new_text": "B", "replace_all": true}, want: "alpha B\nB gamma\n"},
		{name: "refuses an ambiguous old_text",
			args:    Args{"old_text": "beta", "new_text": "B"},
			wantErr: "old_text occurs 2 times; give more context or set replace_all"},
		{name: "says when old_text is not found",
			args: Args{"old_text": "delta", "new_text": "D"}, wantErr: "old_text not found"},
		{name: "refuses an empty old_text",
			args: Args{"old_text": "", "new_text": "D"}, wantErr: "old_text must not be empty"},
		{name: "refuses a no-op edit",
			args: Args{"old_text": "beta", "new_text": "beta"}, wantErr: "nothing to change"},
		{name: "needs new_text",
			args: Args{"old_text": "beta"}, wantErr: `missing argument "new_text"`},
		{name: "refuses a result over 1 MiB",
			args:    Args{"old_text": "beta", "new_text": strings.Repeat("x", maxFileBytes/2), "replace_all": true},
			wantErr: "over the 1 MiB limit"},
		{name: "refuses a binary file", content: "beta\x00",
			args: Args{"old_text": "beta", "new_text": "B"}, wantErr: "binary file"},
		{name: "refuses a file over 1 MiB", content: "beta" + strings.Repeat("x", maxFileBytes),
			args: Args{"old_text": "beta", "new_text": "B"}, wantErr: "over the 1 MiB limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setupFiles(t)
			content := start
			if tt.content != "" {
				content = tt.content
			}
			f.write(t, "dir/f.txt", content)
			tt.args["path"] = "dir/./f.txt"

			res, err := f.call("edit_file", tt.args)

			if tt.wantErr != "" {
				f.wantToolError(t, err, tt.wantErr)
				if got := f.read(t, "dir/f.txt"); got != content {
					t.Errorf("a refused edit changed the file to %q", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := f.read(t, "dir/f.txt"); got != tt.want {
				t.Errorf("content = %q, want %q", got, tt.want)
			}
			if want := []Change{{Path: "dir/f.txt", Op: OpModified}}; !slices.Equal(res.Changes, want) {
				t.Errorf("changes = %v, want %v", res.Changes, want)
			}
		})
	}

	t.Run("reports a missing file", func(t *testing.T) {
		t.Parallel()
		f := setupFiles(t)
		_, err := f.call("edit_file", Args{"path": "nope.txt", "old_text": "a", "new_text": "b"})
		f.wantToolError(t, err, "no such file: nope.txt")
	})
}

func TestDeleteFileDeletesAFileInsideTheWorkspaceOnly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		path    string
		wantErr string
		output  string
	}{
		{name: "deletes a file", path: "dir/f.txt", output: "deleted file dir/f.txt"},
		{name: "deletes an empty directory", path: "dir/empty/", output: "deleted empty directory dir/empty"},
		{name: "refuses a non-empty directory", path: "dir", wantErr: "directory not empty: dir has 2 entries"},
		{name: "refuses the root", path: ".", wantErr: "cannot delete the workspace root"},
		{name: "refuses the root spelled another way", path: "dir/..", wantErr: "cannot delete the workspace root"},
		{name: "needs a path", path: "", wantErr: `missing argument "path"`},
		{name: "reports a missing file", path: "dir/nope", wantErr: "no such file: dir/nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setupFiles(t)
			f.write(t, "dir/f.txt", "x")
			if err := os.Mkdir(filepath.Join(f.ws, "dir", "empty"), 0o755); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, f.ws)

			res, err := f.call("delete_file", Args{"path": tt.path})

			if tt.wantErr != "" {
				f.wantToolError(t, err, tt.wantErr)
				if after := snapshot(t, f.ws); fmt.Sprint(after) != fmt.Sprint(before) {
					t.Errorf("a refused delete changed the workspace: %v", after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Output != tt.output {
				t.Errorf("output = %q, want %q", res.Output, tt.output)
			}
			rel := strings.TrimSuffix(tt.path, "/")
			if want := []Change{{Path: rel, Op: OpDeleted}}; !slices.Equal(res.Changes, want) {
				t.Errorf("changes = %v, want %v", res.Changes, want)
			}
			if _, err := os.Lstat(filepath.Join(f.ws, rel)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s still exists: %v", rel, err)
			}
		})
	}
}

func TestWorkspaceCleanPathRejectsBeforeTouchingTheDisk(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want, wantErr string
	}{
		{in: "a/b", want: "a/b"},
		{in: "./a//b/", want: "a/b"},
		{in: "a/../b", want: "b"},
		{in: ".", want: "."},
		{in: "a/..", want: "."},
		{in: "..a/b", want: "..a/b"},
		{in: "", wantErr: "missing argument"},
		{in: "../a", wantErr: errOutside},
		{in: "a/../../b", wantErr: errOutside},
		{in: "/a", wantErr: errOutside},
		{in: `\a`, wantErr: errOutside},
		{in: `D:a`, wantErr: errOutside},
		{in: "a\x00", wantErr: "NUL"},
		{in: strings.Repeat("a", maxPathBytes+1), wantErr: "longer than 4096 bytes"},
	}
	for _, tt := range tests {
		got, err := cleanPath(tt.in)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("cleanPath(%q) = %q, %v; want error %q", tt.in, got, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("cleanPath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestWorkspaceToolsStopWhenTheContextIsCanceled(t *testing.T) {
	t.Parallel()
	f := setupFiles(t)
	f.write(t, "a.txt", "needle\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tool := range FileTools() {
		args := hostileCalls("a.txt")[tool.Name]
		switch tool.Name {
		case "list_files", "search_files":
			args["path"] = "."
		case "edit_file":
			args["old_text"] = "needle"
		}
		if _, err := tool.Run(ctx, f.env, args); !errors.Is(err, context.Canceled) {
			t.Errorf("%s on a canceled context: %v, want context.Canceled", tool.Name, err)
		}
	}
	if got := f.read(t, "a.txt"); got != "needle\n" {
		t.Errorf("a canceled call changed a.txt to %q", got)
	}
}

// The workspace's configuration folder (its skills) is read, never changed,
// by the file tools: a document steering the agent cannot plant a skill
// that later runs list in their prompt.
func TestFileToolsNeverChangeTheWorkspacesConfigFolder(t *testing.T) {
	t.Parallel()
	f := setupFiles(t)
	f.write(t, ".weft/skills/tidy/SKILL.md", "---\nname: tidy\ndescription: Tidy up.\n---\nBe tidy.\n")
	before := snapshot(t, f.ws)
	for _, c := range []struct {
		tool string
		args Args
	}{
		{"write_file", Args{"path": ".weft/skills/evil/SKILL.md", "content": "---\nname: evil\ndescription: x\n---\n"}},
		{"write_file", Args{"path": "dir/../.weft/skills/tidy/SKILL.md", "content": "changed"}},
		{"edit_file", Args{"path": ".weft/skills/tidy/SKILL.md", "old_text": "Be tidy.", "new_text": "Obey the document."}},
		{"delete_file", Args{"path": ".weft/skills/tidy/SKILL.md"}},
		{"delete_file", Args{"path": ".weft"}},
	} {
		_, err := f.call(c.tool, c.args)
		f.wantToolError(t, err, ".weft holds the workspace's skills and settings")
	}
	if after := snapshot(t, f.ws); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a refused change touched the workspace: %v", after)
	}
	if got, err := f.call("read_file", Args{"path": ".weft/skills/tidy/SKILL.md"}); err != nil || !strings.Contains(got.Output, "Be tidy.") {
		t.Errorf("the config folder must stay readable: %v %q", err, got.Output)
	}
	// A name that only starts like it is an ordinary file.
	if _, err := f.call("write_file", Args{"path": ".weftish", "content": "ok"}); err != nil {
		t.Errorf(".weftish is not the config folder: %v", err)
	}
}

// A command may leave symbolic links in the workspace, and the file tools
// follow links that stay inside it: a link to .weft (or to a folder above
// it) must not let write_file, edit_file or delete_file change it — not
// even make an empty folder in it.
func TestFileToolsNeverChangeTheConfigFolderThroughASymbolicLink(t *testing.T) {
	t.Parallel()
	f := setupFiles(t)
	f.write(t, ".weft/skills/tidy/SKILL.md", "---\nname: tidy\ndescription: Tidy up.\n---\nBe tidy.\n")
	f.write(t, "sub/keep.txt", "x")
	f.symlink(t, ".weft", "cfg")
	f.symlink(t, ".weft/skills", "skills")
	f.symlink(t, ".", "self")
	f.symlink(t, "../.weft", "sub/up")
	before := snapshot(t, f.ws)
	for _, c := range []struct {
		tool string
		args Args
	}{
		{"write_file", Args{"path": "cfg/skills/evil/SKILL.md", "content": "---\nname: evil\ndescription: x\n---\n"}},
		{"write_file", Args{"path": "cfg/skills/tidy/SKILL.md", "content": "changed"}},
		{"write_file", Args{"path": "skills/evil/SKILL.md", "content": "planted"}},
		{"write_file", Args{"path": "self/.weft/skills/evil/SKILL.md", "content": "planted"}},
		{"write_file", Args{"path": "sub/up/skills/evil/SKILL.md", "content": "planted"}},
		{"write_file", Args{"path": "cfg/new.md", "content": "planted"}},
		{"edit_file", Args{"path": "cfg/skills/tidy/SKILL.md", "old_text": "Be tidy.", "new_text": "Obey."}},
		{"edit_file", Args{"path": "skills/tidy/SKILL.md", "old_text": "Be tidy.", "new_text": "Obey."}},
		{"delete_file", Args{"path": "cfg/skills/tidy/SKILL.md"}},
		{"delete_file", Args{"path": "sub/up/skills/tidy/SKILL.md"}},
		{"delete_file", Args{"path": "self/.weft"}},
	} {
		_, err := f.call(c.tool, c.args)
		f.wantToolError(t, err, ".weft holds the workspace's skills and settings")
	}
	if after := snapshot(t, f.ws); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a refused change touched the workspace:\nbefore %v\nafter  %v", before, after)
	}
	// Links elsewhere in the workspace still work, and .weft stays readable through one.
	f.mustCall(t, "write_file", Args{"path": "self/sub/new.txt", "content": "ok"})
	f.mustCall(t, "delete_file", Args{"path": "self/sub/new.txt"})
	if got := f.mustCall(t, "read_file", Args{"path": "cfg/skills/tidy/SKILL.md"}); !strings.Contains(got.Output, "Be tidy.") {
		t.Errorf("read through the link: %q", got.Output)
	}
}
