// The read-only workspace file tools: list_files, read_file and search_files.

package agent

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

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
	// O_NONBLOCK: a command running in the same workspace may swap a
	// FIFO in after the check above; opening it must not block (regular
	// files ignore the flag). What was opened is checked again below.
	f, err := root.OpenFile(native(rel), os.O_RDONLY|syscall.O_NONBLOCK, 0)
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
