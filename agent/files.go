package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
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

// configDir is the workspace's own configuration folder (its skills): the
// file tools read it but never change it, so that a document steering the
// agent cannot plant instructions that later runs list in their prompt.
const configDir = ".weft"

// notConfig refuses a change under the workspace's configuration folder.
func notConfig(rel string) error {
	if rel == configDir || strings.HasPrefix(rel, configDir+"/") {
		return Errorf("%s holds the workspace's skills and settings: the agent does not change it; ask the user to", configDir)
	}
	return nil
}

// changeDir opens the folder of rel, a path the tools are about to change,
// and returns it with rel's last element. notConfig alone reads the path
// as given, but the tools follow symbolic links that stay in the workspace
// and a command can leave one (cfg -> .weft): so every folder a change is
// made in is checked where it really is, as the kernel resolved it, and the
// change is then made in that very folder (held open). With mkdir, missing
// folders on the way are made, each in a folder checked first.
func changeDir(root *os.Root, rel string, mkdir bool) (*os.Root, string, error) {
	top, err := openPath(root)
	if err != nil {
		return nil, "", fmt.Errorf("agent: where is the workspace: %w", err)
	}
	dirRel, base := path.Split(rel)
	dirRel = path.Clean(dirRel)
	var parts []string
	if mkdir && dirRel != "." {
		parts = strings.Split(dirRel, "/")
	}
	dir, err := root.OpenRoot(".")
	if err != nil {
		return nil, "", fileError(rel, err)
	}
	for i, name := range parts {
		if err := notConfigIn(top, dir, name); err != nil {
			dir.Close()
			return nil, "", err
		}
		err := dir.Mkdir(name, 0o755)
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := dir.Stat(name); serr == nil && !fi.IsDir() {
				err = syscall.ENOTDIR
			} else {
				err = nil
			}
		}
		dir.Close()
		if err != nil {
			return nil, "", fileError(rel, err)
		}
		if dir, err = root.OpenRoot(native(path.Join(parts[:i+1]...))); err != nil {
			return nil, "", fileError(rel, err)
		}
	}
	if !mkdir && dirRel != "." {
		dir.Close()
		if dir, err = root.OpenRoot(native(dirRel)); err != nil {
			return nil, "", fileError(rel, err)
		}
	}
	if err := notConfigIn(top, dir, base); err != nil {
		dir.Close()
		return nil, "", err
	}
	return dir, base, nil
}

// notConfigIn refuses name in dir when that is, where dir really is under
// the workspace top (an absolute path), the configuration folder or in it.
func notConfigIn(top string, dir *os.Root, name string) error {
	at, err := openPath(dir)
	if err != nil {
		return fmt.Errorf("agent: where is a folder of the workspace: %w", err)
	}
	rel, err := filepath.Rel(top, at)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return Errorf("a folder of the workspace moved while the call ran; try again")
	}
	return notConfig(path.Join(filepath.ToSlash(rel), name))
}

// openPath is the absolute path of the folder r is open on, as the kernel
// has it (every symbolic link resolved).
func openPath(r *os.Root) (string, error) {
	f, err := r.Open(".")
	if err != nil {
		return "", err
	}
	defer f.Close()
	return os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
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

// escapesRoot reports whether err is os.Root's refusal of a path that
// leads out of the root (through "..", an absolute path or a symbolic
// link). Go keeps that error unexported (os.errPathEscapes; proposal
// golang/go#74640 would export it as os.ErrPathEscapes), so this is the one
// place in Weft that recognizes an error by its text: the exact text of the
// innermost error, never a substring of a longer message.
// TestEscapesRootRecognizesOsRootRefusals pins it to the Go in use: it
// fails, instead of letting an escape read as a generic failure, the day
// the text changes. Replace it by errors.Is once the error is exported.
func escapesRoot(err error) bool {
	for err != nil {
		inner := errors.Unwrap(err)
		if inner == nil {
			return err.Error() == "path escapes from parent"
		}
		err = inner
	}
	return false
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
	case escapesRoot(err):
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
