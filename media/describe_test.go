package media

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"
)

// Each failure keeps the text users saw before describe stopped reading
// error texts: remote failures are told apart by their type.
func TestDescribeTellsGenerationFailuresApartByTypeNotText(t *testing.T) {
	answering := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"message":"model is loading"}}`))
	}))
	defer answering.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // nothing listens there any more
	call := func(base string) error {
		_, err := remote{what: "speech server", base: base}.post(context.Background(), "/v1/audio/speech", []byte(`{}`), 1<<20)
		return err
	}
	answered, unreachable := call(answering.URL), call(gone.URL)
	_, sniffErr := Sniff("generated image", []byte(`<svg xmlns="http://www.w3.org/2000/svg"></svg>`))
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"the server answered an error", answered, "Speech server answered 503 Service Unavailable: model is loading"},
		{"the server answered, wrapped", fmt.Errorf("speech: %w", answered), "Speech server answered 503 Service Unavailable: model is loading"},
		{"the server is unreachable", unreachable, "The media server could not be reached. An admin can check its address on /admin."},
		{"not an image", fmt.Errorf("%w: %w", ErrNotImage, sniffErr), "The image server's reply is not an image."},
		{"nothing to say", ErrNothingToSay, "This answer has no text to read aloud."},
		{"no espeak-ng", fmt.Errorf("espeak: %w", exec.ErrNotFound), "espeak-ng is not installed on the server: an admin can install it, or set up a speech endpoint on /admin."},
		{"too slow", fmt.Errorf("speech: %w", context.DeadlineExceeded), "Generating took too long and was stopped."},
		{"our own message", userError("Image generation is not configured on this server."), "Image generation is not configured on this server."},
		{"a disk error", fmt.Errorf("media: write blob /var/lib/weft/blobs/ab: %w", fs.ErrPermission), "Generating failed on the server."},
		// Text that once classified an error means nothing now.
		{"a lookalike text", errors.New("media: db answered 500: unreachable relation"), "Generating failed on the server."},
	} {
		if got := describe(tc.err); got != tc.want {
			t.Errorf("%s: describe = %q, want %q", tc.name, got, tc.want)
		}
	}
}
