// The workspace file tools that change files: write_file, edit_file and delete_file.

package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

func runWriteFile(ctx context.Context, env *Env, args Args) (Result, error) {
	rel, err := pathArg(args, true)
	if err == nil {
		err = notConfig(rel)
	}
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
	dir, base, err := changeDir(root, rel, true)
	if err != nil {
		return "", err
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
	if err == nil {
		err = notConfig(rel)
	}
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
	if err == nil {
		err = notConfig(rel)
	}
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

	dir, base, err := changeDir(root, rel, false)
	if err != nil {
		return Result{}, err
	}
	defer dir.Close()
	// Lstat: a symbolic link is deleted itself, never its target.
	fi, err := dir.Lstat(base)
	if err != nil {
		return Result{}, fileError(rel, err)
	}
	what := "file"
	if fi.IsDir() {
		what = "empty directory"
		entries, err := fs.ReadDir(dir.FS(), base)
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
	if err := dir.Remove(base); err != nil {
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
