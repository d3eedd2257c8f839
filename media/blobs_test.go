package media

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestBlobsStoreContentUnderItsHash(t *testing.T) {
	t.Parallel()
	b := &Blobs{Dir: filepath.Join(t.TempDir(), "blobs")}
	data := []byte("hello, attachments")
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])

	sha, err := b.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	if sha != want {
		t.Fatalf("Put = %s, want %s", sha, want)
	}
	got, err := b.Read(sha)
	if err != nil || string(got) != string(data) {
		t.Fatalf("Read = %q, %v", got, err)
	}
	f, err := b.Open(sha)
	if err != nil {
		t.Fatal(err)
	}
	opened, _ := io.ReadAll(f)
	f.Close()
	if string(opened) != string(data) {
		t.Errorf("Open read %q", opened)
	}

	path := filepath.Join(b.Dir, sha[:2], sha)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("blob not at Dir/ab/abcdef…: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("blob mode %v, want 0600", fi.Mode().Perm())
	}
	for _, dir := range []string{b.Dir, filepath.Dir(path), filepath.Join(b.Dir, "tmp")} {
		if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o700 {
			t.Errorf("directory %s: %v, %v; want mode 0700", dir, di.Mode().Perm(), err)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(b.Dir, "tmp")); len(left) != 0 {
		t.Errorf("temp files left behind: %v", left)
	}
}

func TestPuttingTheSameContentAgainKeepsOneBlobAndRefreshesIt(t *testing.T) {
	t.Parallel()
	b := &Blobs{Dir: t.TempDir()}
	sha, err := b.Put([]byte("same"))
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour)
	path := filepath.Join(b.Dir, sha[:2], sha)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	again, err := b.Put([]byte("same"))
	if err != nil || again != sha {
		t.Fatalf("Put again = %s, %v; want %s", again, err, sha)
	}
	fi, _ := os.Stat(path)
	if time.Since(fi.ModTime()) > time.Hour {
		t.Errorf("a re-uploaded blob keeps its old time %v, so a collector could take it", fi.ModTime())
	}
	n := 0
	b.Walk(func(string, int64, time.Time) error { n++; return nil })
	if n != 1 {
		t.Errorf("Walk saw %d blobs, want 1", n)
	}
}

func TestBlobsWalkListsEveryBlobAndNothingElse(t *testing.T) {
	t.Parallel()
	b := &Blobs{Dir: t.TempDir()}
	var want []string
	for _, s := range []string{"one", "two", "three"} {
		sha, err := b.Put([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, sha)
	}
	slices.Sort(want)
	// Stray names: a temp file, a file in the root, a wrong-shard file,
	// a non-hex shard.
	os.WriteFile(filepath.Join(b.Dir, "tmp", "abcd-123"), []byte("partial"), 0o600)
	os.WriteFile(filepath.Join(b.Dir, "README"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(b.Dir, want[0][:2], want[1]), []byte("misplaced"), 0o600)
	os.MkdirAll(filepath.Join(b.Dir, "zz"), 0o700)
	os.WriteFile(filepath.Join(b.Dir, "zz", "zz"+want[0][2:]), []byte("x"), 0o600)

	var got []string
	sizes := map[string]int64{}
	err := b.Walk(func(sha string, size int64, mod time.Time) error {
		got = append(got, sha)
		sizes[sha] = size
		if time.Since(mod) > time.Minute {
			t.Errorf("blob %s modified at %v", sha, mod)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Walk = %v, want %v", got, want)
	}
	if sha := hexSHA("three"); sizes[sha] != 5 {
		t.Errorf("size of %q = %d, want 5", "three", sizes[sha])
	}

	stop := errors.New("stop")
	calls := 0
	if err := b.Walk(func(string, int64, time.Time) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Errorf("Walk with a failing fn = %v after %d calls; want stop after 1", err, calls)
	}
	if err := (&Blobs{Dir: filepath.Join(b.Dir, "missing")}).Walk(func(string, int64, time.Time) error { return stop }); err != nil {
		t.Errorf("Walk of a missing directory = %v, want nothing", err)
	}
}

func TestRemovingABlobTwiceIsFine(t *testing.T) {
	t.Parallel()
	b := &Blobs{Dir: t.TempDir()}
	sha, _ := b.Put([]byte("gone soon"))
	if err := b.Remove(sha); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(sha); err != nil {
		t.Errorf("second Remove = %v, want nil", err)
	}
	if _, err := b.Read(sha); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of a removed blob = %v, want fs.ErrNotExist", err)
	}
	if _, err := b.Open(sha); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a removed blob = %v, want fs.ErrNotExist", err)
	}
}

func TestBlobNamesThatAreNotHashesNeverBecomePaths(t *testing.T) {
	t.Parallel()
	b := &Blobs{Dir: t.TempDir()}
	sha, _ := b.Put([]byte("x"))
	for _, bad := range []string{
		"", "tmp", "../../etc/passwd", sha[:63], sha + "0", "ABCDEF" + sha[6:],
		"../" + sha[3:], sha[:2] + "/" + sha[3:], sha[:63] + "g", sha[:62] + "\x00a",
	} {
		if _, err := b.Open(bad); !errors.Is(err, ErrInvalidSHA) {
			t.Errorf("Open(%q) = %v, want ErrInvalidSHA", bad, err)
		}
		if _, err := b.Read(bad); !errors.Is(err, ErrInvalidSHA) {
			t.Errorf("Read(%q) = %v, want ErrInvalidSHA", bad, err)
		}
		if err := b.Remove(bad); !errors.Is(err, ErrInvalidSHA) {
			t.Errorf("Remove(%q) = %v, want ErrInvalidSHA", bad, err)
		}
	}
}

func TestCleanTempRemovesOnlyOldLeftovers(t *testing.T) {
	t.Parallel()
	b := &Blobs{Dir: t.TempDir()}
	if n, err := b.CleanTemp(time.Hour); n != 0 || err != nil {
		t.Errorf("CleanTemp with no temp directory = %d, %v", n, err)
	}
	sha, _ := b.Put([]byte("kept"))
	tmp := filepath.Join(b.Dir, "tmp")
	old := time.Now().Add(-2 * time.Hour)
	for _, name := range []string{"old-1", "old-2"} {
		p := filepath.Join(tmp, name)
		os.WriteFile(p, []byte("partial"), 0o600)
		os.Chtimes(p, old, old)
	}
	os.WriteFile(filepath.Join(tmp, "in-progress"), []byte("partial"), 0o600)
	n, err := b.CleanTemp(time.Hour)
	if err != nil || n != 2 {
		t.Fatalf("CleanTemp = %d, %v; want 2", n, err)
	}
	left, _ := os.ReadDir(tmp)
	if len(left) != 1 || left[0].Name() != "in-progress" {
		t.Errorf("left in tmp: %v, want only in-progress", left)
	}
	if _, err := b.Read(sha); err != nil {
		t.Errorf("a stored blob was touched: %v", err)
	}
}

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
