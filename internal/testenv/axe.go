package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var axeOnce = sync.OnceValues(func() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "axe", "axe.min.js"))
	return string(b), err
})

// Axe returns the source of axe-core (vendored under internal/testenv/axe,
// test-only: Weft never serves it), for a browser test to evaluate in a page
// and then call axe.run.
func Axe(t testing.TB) string {
	t.Helper()
	src, err := axeOnce()
	if err != nil {
		t.Fatalf("read the vendored axe-core: %v", err)
	}
	return src
}

// Artifacts is the folder where browser tests write what a person reviews
// (screenshots): $WEFT_ARTIFACTS, or test-artifacts/ at the repository's
// root. It is created when missing.
func Artifacts(t testing.TB, sub string) string {
	t.Helper()
	dir := os.Getenv("WEFT_ARTIFACTS")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", "test-artifacts")
	}
	dir = filepath.Join(dir, sub)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifacts folder: %v", err)
	}
	return dir
}
