package media

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// fakeS3 is an S3 server in the test process (gofakes3, in memory) with
// one bucket, "weft", and a clock the test moves.
type fakeS3 struct {
	url     string
	backend *s3mem.Backend
	clock   gofakes3.TimeSourceAdvancer
}

func newFakeS3(t *testing.T) *fakeS3 {
	t.Helper()
	clock := gofakes3.FixedTimeSource(time.Now().Add(-72 * time.Hour).Truncate(time.Second))
	backend := s3mem.New(s3mem.WithTimeSource(clock))
	if err := backend.CreateBucket("weft"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithTimeSource(clock), gofakes3.WithTimeSkewLimit(0)).Server()) // the clock is the test's
	t.Cleanup(srv.Close)
	return &fakeS3{url: srv.URL, backend: backend, clock: clock}
}

func (f *fakeS3) blobs(t *testing.T, prefix string) *S3Blobs {
	t.Helper()
	b, err := NewS3Blobs(context.Background(), S3Config{Endpoint: f.url, Bucket: "weft", Prefix: prefix, Region: "us-east-1",
		AccessKey: "weft", SecretKey: "secret-key"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stray puts an object that is not a blob where a listing sees it.
func (f *fakeS3) stray(t *testing.T, key string) {
	t.Helper()
	if _, err := f.backend.PutObject("weft", key, map[string]string{}, bytes.NewReader([]byte("x")), 1, nil); err != nil {
		t.Fatal(err)
	}
}

// The same contract as the local directory, against an S3 server: content
// under its hash, opened and seekable with its size and time, a missing
// blob fs.ErrNotExist, names that are not hashes refused, a second remove
// fine, and a listing in hash order of the blobs alone.
func TestS3BlobsKeepTheBlobStoreContract(t *testing.T) {
	t.Parallel()
	f := newFakeS3(t)
	b := f.blobs(t, "weft/blobs")
	var shas []string
	for _, s := range []string{"one", "two", "three", strings.Repeat("big ", 300_000)} {
		sha, err := b.Put([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(s))
		if sha != hex.EncodeToString(sum[:]) {
			t.Fatalf("Put(%.10q) = %s, not the content's SHA-256", s, sha)
		}
		shas = append(shas, sha)
	}
	got, err := b.Read(shas[3])
	if err != nil || len(got) != 1_200_000 || string(got[:8]) != "big big " {
		t.Fatalf("Read of the 1.2 MB blob: %d bytes, %v", len(got), err)
	}
	file, err := b.Open(shas[1])
	if err != nil {
		t.Fatal(err)
	}
	st, err := file.Stat()
	if err != nil || st.Size() != 3 || st.ModTime().IsZero() {
		t.Fatalf("Stat = %v, %v", st, err)
	}
	if _, err := file.Seek(1, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(file)
	if err := file.Close(); err != nil || string(rest) != "wo" {
		t.Fatalf("after a seek to 1: %q (close: %v)", rest, err)
	}

	missing := strings.Repeat("ab", 32)
	if _, err := b.Open(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing blob: %v, want fs.ErrNotExist", err)
	}
	if _, err := b.Read(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of a missing blob: %v, want fs.ErrNotExist", err)
	}
	for _, bad := range []string{"../../etc/passwd", "AB" + missing[2:], missing[:63], ""} {
		if _, err := b.Open(bad); !errors.Is(err, ErrInvalidSHA) {
			t.Errorf("Open(%q): %v, want ErrInvalidSHA", bad, err)
		}
		if err := b.Remove(bad); !errors.Is(err, ErrInvalidSHA) {
			t.Errorf("Remove(%q): %v, want ErrInvalidSHA", bad, err)
		}
	}

	f.stray(t, "weft/blobs/README")
	f.stray(t, "weft/blobs/zz/not-a-hash")
	f.stray(t, "weft/blobs/00/"+shas[0]) // a hash in the wrong shard
	f.stray(t, "elsewhere/"+shas[0][:2]+"/"+shas[0])
	var walked []string
	sizes := map[string]int64{}
	if err := b.Walk(func(sha string, size int64, mod time.Time) error {
		walked = append(walked, sha)
		sizes[sha] = size
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(shas)
	slices.Sort(want)
	if !slices.Equal(walked, want) {
		t.Fatalf("Walk = %v, want the four blobs in hash order %v", walked, want)
	}
	if sizes[shas[3]] != 1_200_000 {
		t.Errorf("Walk gave the big blob size %d", sizes[shas[3]])
	}
	stop := errors.New("stop")
	n := 0
	if err := b.Walk(func(string, int64, time.Time) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("a walk fn's error: %v after %d calls", err, n)
	}

	for range 2 {
		if err := b.Remove(shas[0]); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	}
	if _, err := b.Read(shas[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read after Remove: %v", err)
	}
	if n, err := b.CleanTemp(time.Hour); n != 0 || err != nil {
		t.Errorf("CleanTemp = %d, %v", n, err)
	}
}

// Content stored again gets a new time, so the collector (which spares
// blobs stored within UnsentAfter) does not take one a message is about
// to reference again.
func TestS3BlobsPutAgainRefreshesTheTime(t *testing.T) {
	t.Parallel()
	f := newFakeS3(t)
	b := f.blobs(t, "")
	sha, err := b.Put([]byte("same"))
	if err != nil {
		t.Fatal(err)
	}
	mod := func() time.Time {
		t.Helper()
		var at time.Time
		n := 0
		if err := b.Walk(func(_ string, _ int64, m time.Time) error { at = m; n++; return nil }); err != nil || n != 1 {
			t.Fatalf("Walk: %d blobs, %v", n, err)
		}
		return at
	}
	first := mod()
	f.clock.Advance(48 * time.Hour)
	if again, err := b.Put([]byte("same")); err != nil || again != sha {
		t.Fatalf("Put again = %s, %v", again, err)
	}
	if second := mod(); second.Sub(first) < 47*time.Hour {
		t.Errorf("stored again 48 h later, the blob's time went from %v to %v", first, second)
	}
}

// Two instances pointed at one bucket: what one stores the other serves,
// lists and removes.
func TestS3BlobsAreSharedByInstancesOnOneBucket(t *testing.T) {
	t.Parallel()
	f := newFakeS3(t)
	a, b := f.blobs(t, "blobs/"), f.blobs(t, "blobs/")
	sha, err := a.Put([]byte("uploaded on instance A"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Read(sha); err != nil || string(got) != "uploaded on instance A" {
		t.Fatalf("instance B reads %q, %v", got, err)
	}
	if err := b.Remove(sha); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Open(sha); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("instance A opens a blob B removed: %v", err)
	}
}

// A service given a store keeps its files there, not under DataDir.
func TestAServiceKeepsItsFilesInTheStoreItIsGiven(t *testing.T) {
	t.Parallel()
	f := newFakeS3(t)
	store := f.blobs(t, "")
	s, err := NewService(nil, brokenQueue{}, Config{DataDir: t.TempDir(), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if s.Blobs != BlobStore(store) {
		t.Fatalf("the service keeps its files in %T", s.Blobs)
	}
	sha, err := s.put([]byte("an attachment"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := store.Read(sha); err != nil || string(got) != "an attachment" {
		t.Fatalf("the bucket holds %q, %v", got, err)
	}
}

// A bucket that is not there, a bad endpoint or none stop start-up with
// what is wrong, not the first upload.
func TestNewS3BlobsRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	f := newFakeS3(t)
	for _, c := range []struct {
		cfg  S3Config
		want string
	}{
		{S3Config{Endpoint: f.url, Bucket: "absent"}, `bucket "absent" does not exist`},
		{S3Config{Endpoint: "ftp://example.com", Bucket: "weft"}, "must be http(s)://host[:port]"},
		{S3Config{Endpoint: f.url + "/path", Bucket: "weft"}, "must be http(s)://host[:port]"},
		{S3Config{Bucket: "weft"}, "endpoint not set"},
		{S3Config{Endpoint: f.url}, "bucket not set"},
	} {
		_, err := NewS3Blobs(context.Background(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

// An opened object serves HTTP range requests as a file does
// (http.ServeContent seeks to its end for the size, then to the range).
func TestAnS3BlobServesARangeRequest(t *testing.T) {
	t.Parallel()
	f := newFakeS3(t)
	b := f.blobs(t, "")
	sha, err := b.Put([]byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	file, err := b.Open(sha)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	st, _ := file.Stat()
	req := httptest.NewRequest("GET", "/attachments/1", nil)
	req.Header.Set("Range", "bytes=10-13")
	rec := httptest.NewRecorder()
	http.ServeContent(rec, req, "", st.ModTime(), file)
	if rec.Code != http.StatusPartialContent || rec.Body.String() != "abcd" || rec.Header().Get("Content-Range") != "bytes 10-13/16" {
		t.Fatalf("a range request: %d %q %q", rec.Code, rec.Body.String(), rec.Header().Get("Content-Range"))
	}
}
