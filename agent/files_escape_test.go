package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// The escape error of os.Root is unexported (golang/go#74640); this pins
// escapesRoot to the Go in use, so a change of its text fails here rather
// than making escapes read as generic failures.
func TestEscapesRootRecognizesOsRootRefusals(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "secret.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "secret.txt"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, name := range []string{"../secret.txt", "link", "/etc/passwd"} {
		_, err := root.Open(name)
		if err == nil {
			t.Fatalf("opening %q in the root worked", name)
		}
		if !escapesRoot(err) {
			t.Errorf("escapesRoot(%v) = false for %q, want true", err, name)
		}
		if !escapesRoot(fmt.Errorf("read file: %w", err)) {
			t.Errorf("escapesRoot misses the escape of %q once wrapped", name)
		}
	}
	_, missing := root.Open("nothing-here")
	for _, err := range []error{missing, fs.ErrPermission, errors.New("read: path escapes from parent (said a tool)"), nil} {
		if escapesRoot(err) {
			t.Errorf("escapesRoot(%v) = true, want false", err)
		}
	}
}
