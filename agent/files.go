package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Limits of the workspace file tools. They keep one tool call from filling
// the model's context or the disk.
const (
	maxFileBytes     = 1 << 20  // largest file read whole, searched, written or edited
	maxOutputBytes   = 64 << 10 // largest text a tool returns
	maxListEntries   = 500
	maxSearchMatches = 200
	maxPathBytes     = 4096
	binarySniffBytes = 8 << 10 // a NUL byte in this prefix marks a file binary
	maxMatchLineLen  = 500     // a matching line longer than this is cut
)

// errOutside is what the model is told for any path that leaves the
// workspace, however it tried.
const errOutside = "path must stay inside the workspace"

// FileTools returns the workspace file tools. Every path they take is
// relative to Env.Root and is resolved only through an *os.Root opened on
// it, so that neither "..", an absolute path nor a symbolic link (even one
// swapped in while a call runs) reaches a file outside the workspace.
func FileTools() []Tool {
	pathParam := func(desc string, required bool) Param {
		return Param{Name: "path", Type: "string", Description: desc, Required: required}
	}
	return []Tool{
		{
			Name:        "list_files",
			Description: "List a workspace directory: each entry's path, kind (file, dir or symlink) and size. At most 500 entries.",
			Class:       ClassRead,
			Params: []Param{
				pathParam(`Directory relative to the workspace root; default "."`, false),
				{Name: "recursive", Type: "boolean", Description: "Also list subdirectories (not .git, symlinks are not followed)"},
			},
			Run: runListFiles,
		},
		{
			Name:        "read_file",
			Description: "Read a text file of the workspace. Files over 1 MiB must be read by lines with offset and limit. Output is capped at 64 KiB.",
			Class:       ClassRead,
			Params: []Param{
				pathParam("File relative to the workspace root", true),
				{Name: "offset", Type: "integer", Description: "First line to read, 1-based"},
				{Name: "limit", Type: "integer", Description: "Number of lines to read"},
			},
			Run: runReadFile,
		},
		{
			Name:        "search_files",
			Description: "Search the workspace's text files for a plain substring, ignoring case. Returns path:line: text, at most 200 matches.",
			Class:       ClassRead,
			Params: []Param{
				{Name: "query", Type: "string", Description: "Text to find (not a regular expression)", Required: true},
				pathParam(`Directory or file to search, relative to the workspace root; default "."`, false),
			},
			Run: runSearchFiles,
		},
		{
			Name:        "write_file",
			Description: "Create or replace a file of the workspace with the given content (at most 1 MiB). Parent directories are created.",
			Class:       ClassWrite,
			Params: []Param{
				pathParam("File relative to the workspace root", true),
				{Name: "content", Type: "string", Description: "The whole new content of the file", Required: true},
			},
			Run: runWriteFile,
		},
		{
			Name:        "edit_file",
			Description: "Replace text in a file of the workspace. old_text must occur exactly once unless replace_all is true.",
			Class:       ClassWrite,
			Params: []Param{
				pathParam("File relative to the workspace root", true),
				{Name: "old_text", Type: "string", Description: "Exact text to replace, with enough context to be unique", Required: true},
				{Name: "new_text", Type: "string", Description: "Text to put in its place", Required: true},
				{Name: "replace_all", Type: "boolean", Description: "Replace every occurrence"},
			},
			Run: runEditFile,
		},
		{
			Name:        "delete_file",
			Description: "Delete a file or an empty directory of the workspace.",
			Class:       ClassWrite,
			Params:      []Param{pathParam("File or empty directory relative to the workspace root", true)},
			Run:         runDeleteFile,
		},
	}
}

// cleanPath checks a path argument before anything touches the disk and
// returns it cleaned and slash-separated ("." for the root itself). The
// *os.Root checks again on every use; this is for clear messages.
func cleanPath(p string) (string, error) {
	switch {
	case p == "":
		return "", Errorf("missing argument %q", "path")
	case len(p) > maxPathBytes:
		return "", Errorf("path is longer than %d bytes", maxPathBytes)
	case strings.IndexByte(p, 0) >= 0:
		return "", Errorf("path must not contain a NUL byte")
	case p[0] == '/' || p[0] == '\\' || hasDriveLetter(p) || filepath.IsAbs(p):
		return "", Errorf("%s; give a path relative to it", errOutside)
	}
	rel := path.Clean(p)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", Errorf("%s; %q leaves it", errOutside, p)
	}
	return rel, nil
}

func hasDriveLetter(p string) bool {
	return len(p) >= 2 && p[1] == ':' && ('a' <= p[0]|0x20 && p[0]|0x20 <= 'z')
}

// native turns a cleaned slash path into the form *os.Root methods take.
func native(rel string) string { return filepath.FromSlash(rel) }

// pathArg reads and cleans the "path" argument: a directory defaulting to
// the root when optional, a file (never the root) when required.
func pathArg(args Args, required bool) (string, error) {
	p, err := args.String("path", required)
	if err != nil {
		return "", err
	}
	if p == "" && !required {
		p = "."
	}
	rel, err := cleanPath(p)
	if err == nil && required && rel == "." {
		return "", Errorf("path must name a file, not the workspace root")
	}
	return rel, err
}

// openWorkspace opens the root every path of a call is resolved through.
func openWorkspace(env *Env) (*os.Root, error) {
	if env == nil || env.Root == "" {
		return nil, errors.New("agent: no workspace root")
	}
	root, err := os.OpenRoot(env.Root)
	if err != nil {
		return nil, fmt.Errorf("agent: open workspace: %w", err)
	}
	return root, nil
}

// fileError turns an error of an *os.Root or *os.File call on rel into a
// *ToolError that names only rel. Their own texts may hold the absolute
// path of the workspace (a file opened in a Root is named by the joined
// path), so they never reach the model; an error with no plain meaning is
// returned wrapped, which the model sees as a generic failure.
func fileError(rel string, err error) error {
	var te *ToolError
	switch {
	case errors.As(err, &te):
		return err
	case strings.Contains(err.Error(), "path escapes from parent"):
		return Errorf("%s: %s leads outside it through a symbolic link", errOutside, rel)
	case errors.Is(err, fs.ErrNotExist):
		return Errorf("no such file: %s", rel)
	case errors.Is(err, fs.ErrPermission):
		return Errorf("permission denied: %s", rel)
	case errors.Is(err, syscall.EISDIR):
		return Errorf("is a directory: %s", rel)
	case errors.Is(err, syscall.ENOTDIR):
		return Errorf("not a directory: a parent of %s is a file", rel)
	case errors.Is(err, syscall.ENOTEMPTY):
		return Errorf("directory not empty: %s", rel)
	case errors.Is(err, syscall.ELOOP):
		return Errorf("too many symbolic links: %s", rel)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return Errorf("path is too long: %s", rel)
	}
	return fmt.Errorf("agent: %s: %w", rel, err)
}

func runListFiles(ctx context.Context, env *Env, args Args) (Result, error) {
	rel, err := pathArg(args, false)
	if err != nil {
		return Result{}, err
	}
	recursive, err := args.Bool("recursive", false)
	if err != nil {
		return Result{}, err
	}
	root, err := openWorkspace(env)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()
	fsys := root.FS()

	fi, err := fs.Stat(fsys, rel)
	if err != nil {
		return Result{}, fileError(rel, err)
	}
	if !fi.IsDir() {
		return Result{}, Errorf("not a directory: %s (use read_file)", rel)
	}

	var b strings.Builder
	n, truncated := 0, false
	err = fs.WalkDir(fsys, rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == rel {
				return err
			}
			return nil // an unreadable subdirectory is left out, not fatal
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == rel {
			return nil
		}
		if n == maxListEntries {
			truncated = true
			return fs.SkipAll
		}
		n++
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			fmt.Fprintf(&b, "symlink  %s\n", p)
		case d.IsDir():
			fmt.Fprintf(&b, "dir      %s/\n", p)
			if !recursive || d.Name() == ".git" {
				return fs.SkipDir
			}
		default:
			var size int64
			if info, err := d.Info(); err == nil {
				size = info.Size()
			}
			fmt.Fprintf(&b, "file     %s  (%d bytes)\n", p, size)
		}
		return nil
	})
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Result{}, ctxErr
		}
		return Result{}, fileError(rel, err)
	}
	switch {
	case n == 0:
		b.WriteString("(empty directory)\n")
	case truncated:
		fmt.Fprintf(&b, "[truncated: listed the first %d entries; list a subdirectory to see more]\n", maxListEntries)
	}
	return Result{Output: b.String()}, nil
}

func runReadFile(ctx context.Context, env *Env, args Args) (Result, error) {
	rel, err := pathArg(args, true)
	if err != nil {
		return Result{}, err
	}
	offset, err := args.Int("offset", 0)
	if err != nil {
		return Result{}, err
	}
	limit, err := args.Int("limit", 0)
	if err != nil {
		return Result{}, err
	}
	if offset < 0 || limit < 0 {
		return Result{}, Errorf("offset and limit must not be negative")
	}
	root, err := openWorkspace(env)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()

	f, fi, err := openRegular(root, rel)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	byLines := offset > 0 || limit > 0
	if !byLines && fi.Size() > maxFileBytes {
		return Result{}, Errorf("%s is %d bytes, over the 1 MiB limit for a whole read; read it by lines with offset and limit", rel, fi.Size())
	}
	br := bufio.NewReaderSize(f, 32<<10)
	if head, err := br.Peek(binarySniffBytes); err != nil && err != io.EOF {
		return Result{}, fileError(rel, err)
	} else if isBinary(head) {
		return Result{}, Errorf("%s is a binary file; read_file only reads text", rel)
	}

	first := max(offset, 1)
	out := cappedBuffer{max: maxOutputBytes}
	line, more := 1, false
	for i := 0; ; i++ {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return Result{}, err
			}
		}
		if limit > 0 && line >= first+limit {
			_, err := br.Peek(1)
			more = err == nil
			break
		}
		chunk, err := br.ReadSlice('\n')
		if line >= first {
			out.Write(chunk)
		}
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			line++
		}
		if err == io.EOF {
			if len(chunk) > 0 && chunk[len(chunk)-1] != '\n' {
				line++ // a last line without a newline still counts
			}
			break
		}
		if err != nil && err != bufio.ErrBufferFull {
			return Result{}, fileError(rel, err)
		}
	}
	if first >= line && first > 1 {
		return Result{}, Errorf("offset %d is past the end of %s (%d lines)", offset, rel, line-1)
	}

	text := out.String()
	if text == "" {
		text = "(empty file)"
	}
	if more {
		text = endLine(text) + fmt.Sprintf("[more lines follow; continue with offset=%d]", line)
	}
	return Result{Output: text, Sources: []Source{{Kind: "file", Label: rel}}}, nil
}

// openRegular opens rel for reading and refuses anything but a regular
// file. The Stat before the open keeps a FIFO from blocking the call; the
// check that counts is the one on the opened file.
func openRegular(root *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	fi, err := root.Stat(native(rel))
	if err != nil {
		return nil, nil, fileError(rel, err)
	}
	if err := checkRegular(rel, fi); err != nil {
		return nil, nil, err
	}
	f, err := root.Open(native(rel))
	if err != nil {
		return nil, nil, fileError(rel, err)
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, fileError(rel, err)
	}
	if err := checkRegular(rel, fi); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func checkRegular(rel string, fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return Errorf("%s is a directory (use list_files)", rel)
	case !fi.Mode().IsRegular():
		return Errorf("%s is not a regular file", rel)
	}
	return nil
}

// readText reads a whole text file of at most maxFileBytes.
func readText(root *os.Root, rel string) ([]byte, fs.FileInfo, error) {
	f, fi, err := openRegular(root, rel)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	tooBig := Errorf("%s is over the 1 MiB limit", rel)
	if fi.Size() > maxFileBytes {
		return nil, nil, tooBig
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, nil, fileError(rel, err)
	}
	if len(data) > maxFileBytes {
		return nil, nil, tooBig
	}
	if isBinary(data) {
		return nil, nil, Errorf("%s is a binary file", rel)
	}
	return data, fi, nil
}

func isBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), binarySniffBytes)], 0) >= 0
}

func runSearchFiles(ctx context.Context, env *Env, args Args) (Result, error) {
	query, err := args.String("query", true)
	if err != nil {
		return Result{}, err
	}
	if strings.TrimSpace(query) == "" {
		return Result{}, Errorf("query must not be empty")
	}
	rel, err := pathArg(args, false)
	if err != nil {
		return Result{}, err
	}
	root, err := openWorkspace(env)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()
	fsys := root.FS()
	if _, err := fs.Stat(fsys, rel); err != nil {
		return Result{}, fileError(rel, err)
	}

	needle := bytes.ToLower([]byte(query))
	out := cappedBuffer{max: maxOutputBytes}
	var sources []Source
	matches, capped := 0, false
	err = fs.WalkDir(fsys, rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == rel {
				return err
			}
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" && p != rel {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // symlinks and special files are never followed or opened
		}
		if info, err := d.Info(); err != nil || info.Size() > maxFileBytes {
			return nil
		}
		data, err := readCapped(fsys, p)
		if err != nil || len(data) > maxFileBytes || isBinary(data) {
			return nil
		}
		found := false
		n := 0
		for text := range bytes.Lines(data) {
			n++
			if !bytes.Contains(bytes.ToLower(text), needle) {
				continue
			}
			if matches == maxSearchMatches {
				capped = true
				return fs.SkipAll
			}
			matches++
			found = true
			fmt.Fprintf(&out, "%s:%d: %s\n", p, n, cutLine(text))
		}
		if found {
			sources = append(sources, Source{Kind: "file", Label: p})
		}
		return nil
	})
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Result{}, ctxErr
		}
		return Result{}, fileError(rel, err)
	}
	if matches == 0 {
		return Result{Output: fmt.Sprintf("no matches for %q in %s", query, rel)}, nil
	}
	text := out.String()
	if capped {
		text = endLine(text) + fmt.Sprintf("[stopped after %d matches; narrow the query or the path]", maxSearchMatches)
	}
	return Result{Output: text, Sources: sources}, nil
}

// readCapped reads at most one byte over maxFileBytes of p, however much
// the file grew since it was listed.
func readCapped(fsys fs.FS, p string) ([]byte, error) {
	f, err := fsys.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxFileBytes+1))
}

// cutLine trims a matching line for display.
func cutLine(line []byte) string {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) <= maxMatchLineLen {
		return string(line)
	}
	return string(trimPartialRune(line[:maxMatchLineLen])) + "…"
}

func runWriteFile(ctx context.Context, env *Env, args Args) (Result, error) {
	rel, err := pathArg(args, true)
	if err != nil {
		return Result{}, err
	}
	content, err := args.String("content", true)
	if err != nil {
		return Result{}, err
	}
	if len(content) > maxFileBytes {
		return Result{}, Errorf("content is %d bytes, over the 1 MiB limit of write_file", len(content))
	}
	root, err := openWorkspace(env)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()
	op, err := writeAtomic(ctx, root, rel, []byte(content))
	if err != nil {
		return Result{}, err
	}
	return Result{
		Output:  fmt.Sprintf("wrote %d bytes to %s (%s)", len(content), rel, op),
		Changes: []Change{{Path: rel, Op: op}},
	}, nil
}

// writeAtomic replaces rel with data through a temporary file in the same
// directory. The directory is opened once as its own Root, so the temporary
// file and the rename act on that very directory even if its path is
// swapped for a symbolic link meanwhile. It returns OpCreated or OpModified.
func writeAtomic(ctx context.Context, root *os.Root, rel string, data []byte) (string, error) {
	dirRel, base := path.Split(rel)
	dirRel = path.Clean(dirRel)
	if err := root.MkdirAll(native(dirRel), 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", Errorf("not a directory: a parent of %s is a file", rel)
		}
		return "", fileError(rel, err)
	}
	dir, err := root.OpenRoot(native(dirRel))
	if err != nil {
		return "", fileError(rel, err)
	}
	defer dir.Close()

	op, perm := OpCreated, fs.FileMode(0o644)
	switch fi, err := dir.Lstat(base); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", fileError(rel, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return "", Errorf("%s is a symbolic link; write to the file it points to", rel)
	case !fi.Mode().IsRegular():
		return "", checkRegular(rel, fi)
	case fi.Mode().Perm()&0o200 == 0:
		return "", Errorf("permission denied: %s is read-only", rel)
	default:
		op, perm = OpModified, fi.Mode().Perm()
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}

	tmp := ".weft-write-" + rand.Text()
	f, err := dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", fileError(rel, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dir.Rename(tmp, base)
	}
	if err != nil {
		_ = dir.Remove(tmp)
		return "", fileError(rel, err)
	}
	return op, nil
}

func runEditFile(ctx context.Context, env *Env, args Args) (Result, error) {
	rel, err := pathArg(args, true)
	if err != nil {
		return Result{}, err
	}
	oldText, err := args.String("old_text", true)
	if err != nil {
		return Result{}, err
	}
	newText, err := args.String("new_text", true)
	if err != nil {
		return Result{}, err
	}
	replaceAll, err := args.Bool("replace_all", false)
	if err != nil {
		return Result{}, err
	}
	switch {
	case oldText == "":
		return Result{}, Errorf("old_text must not be empty")
	case oldText == newText:
		return Result{}, Errorf("old_text and new_text are the same; nothing to change")
	}
	root, err := openWorkspace(env)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()

	data, _, err := readText(root, rel)
	if err != nil {
		return Result{}, err
	}
	text := string(data)
	n := strings.Count(text, oldText)
	switch {
	case n == 0:
		return Result{}, Errorf("old_text not found in %s", rel)
	case n > 1 && !replaceAll:
		return Result{}, Errorf("old_text occurs %d times; give more context or set replace_all", n)
	}
	edited := strings.ReplaceAll(text, oldText, newText)
	if len(edited) > maxFileBytes {
		return Result{}, Errorf("the edited file would be %d bytes, over the 1 MiB limit", len(edited))
	}
	if _, err := writeAtomic(ctx, root, rel, []byte(edited)); err != nil {
		return Result{}, err
	}
	return Result{
		Output:  fmt.Sprintf("replaced %d occurrence(s) in %s", n, rel),
		Changes: []Change{{Path: rel, Op: OpModified}},
	}, nil
}

func runDeleteFile(ctx context.Context, env *Env, args Args) (Result, error) {
	p, err := args.String("path", true)
	if err != nil {
		return Result{}, err
	}
	rel, err := cleanPath(p)
	if err != nil {
		return Result{}, err
	}
	if rel == "." {
		return Result{}, Errorf("cannot delete the workspace root")
	}
	root, err := openWorkspace(env)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()

	// Lstat: a symbolic link is deleted itself, never its target.
	fi, err := root.Lstat(native(rel))
	if err != nil {
		return Result{}, fileError(rel, err)
	}
	what := "file"
	if fi.IsDir() {
		what = "empty directory"
		entries, err := fs.ReadDir(root.FS(), rel)
		if err != nil {
			return Result{}, fileError(rel, err)
		}
		if len(entries) > 0 {
			return Result{}, Errorf("directory not empty: %s has %d entries; delete them first", rel, len(entries))
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if err := root.Remove(native(rel)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			err = syscall.ENOTEMPTY // some systems report a non-empty directory so
		}
		return Result{}, fileError(rel, err)
	}
	return Result{
		Output:  fmt.Sprintf("deleted %s %s", what, rel),
		Changes: []Change{{Path: rel, Op: OpDeleted}},
	}, nil
}

// cappedBuffer keeps the first max bytes written to it and counts the rest.
type cappedBuffer struct {
	buf     []byte
	max     int
	dropped int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	room := max(c.max-len(c.buf), 0)
	if len(p) <= room {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	c.buf = append(c.buf, p[:room]...)
	c.dropped += len(p) - room
	return len(p), nil
}

// String returns the kept text, cut at a whole character, with a note of
// how much was left out.
func (c *cappedBuffer) String() string {
	if c.dropped == 0 {
		return string(c.buf)
	}
	kept := trimPartialRune(c.buf)
	dropped := c.dropped + len(c.buf) - len(kept)
	return endLine(string(kept)) + fmt.Sprintf("[truncated: %d more bytes]", dropped)
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

func endLine(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}
