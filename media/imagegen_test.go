package media

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"weft/internal/hostile"
)

// imageServer fakes an OpenAI image endpoint that answers with reply (a
// function of the server's own URL) and serves /files/pic as file.
type imageServer struct {
	*httptest.Server
	mu    sync.Mutex
	auths map[string]string // path → Authorization
	body  map[string]any
}

func newImageServer(t *testing.T, status int, reply func(base string) string, file []byte) *imageServer {
	s := &imageServer{auths: map[string]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auths[r.Method+" "+r.URL.Path] = r.Header.Get("Authorization")
		if r.Method == http.MethodPost {
			json.NewDecoder(r.Body).Decode(&s.body)
		}
		s.mu.Unlock()
		if r.URL.Path == "/files/pic" {
			w.Write(file)
			return
		}
		w.WriteHeader(status)
		io.WriteString(w, reply(s.URL))
	}))
	t.Cleanup(s.Close)
	return s
}

func b64Reply(data []byte) func(string) string {
	return func(string) string {
		return fmt.Sprintf(`{"created":1,"data":[{"b64_json":%q,"revised_prompt":"x"}]}`, base64.StdEncoding.EncodeToString(data))
	}
}

func TestGenerateReturnsTheImageFromBase64(t *testing.T) {
	t.Parallel()
	img := hostile.PNGOf(64, 48)
	srv := newImageServer(t, http.StatusOK, b64Reply(img), nil)
	g := &ImageGenerator{URL: srv.URL, APIKey: "sk-img", Model: "dall-e-3", Size: "1024x1024"}
	data, mime, err := g.Generate(context.Background(), "a red and blue flag")
	if err != nil {
		t.Fatal(err)
	}
	if mime != "image/png" || string(data) != string(img) {
		t.Errorf("Generate = %d bytes, %s; want the PNG", len(data), mime)
	}
	if got := srv.auths["POST /v1/images/generations"]; got != "Bearer sk-img" {
		t.Errorf("Authorization = %q", got)
	}
	want := map[string]any{"model": "dall-e-3", "prompt": "a red and blue flag", "n": 1.0, "size": "1024x1024", "response_format": "b64_json"}
	for k, v := range want {
		if srv.body[k] != v {
			t.Errorf("body[%s] = %v, want %v", k, srv.body[k], v)
		}
	}
}

func TestGenerateLeavesOutAnEmptyModelAndSize(t *testing.T) {
	t.Parallel()
	srv := newImageServer(t, http.StatusOK, b64Reply(hostile.JPEGOf(8, 8)), nil)
	_, mime, err := (&ImageGenerator{URL: srv.URL}).Generate(context.Background(), "x")
	if err != nil || mime != "image/jpeg" {
		t.Fatalf("Generate = %s, %v", mime, err)
	}
	if _, ok := srv.body["model"]; ok {
		t.Errorf("an empty model was sent")
	}
	if _, ok := srv.body["size"]; ok {
		t.Errorf("an empty size was sent")
	}
	if srv.auths["POST /v1/images/generations"] != "" {
		t.Errorf("an Authorization header was sent without a key")
	}
}

func TestGenerateFetchesAnImageGivenByURL(t *testing.T) {
	t.Parallel()
	img := hostile.GIFOf(10, 10)
	srv := newImageServer(t, http.StatusOK, func(base string) string {
		return `{"data":[{"url":"` + base + `/files/pic"}]}`
	}, img)
	data, mime, err := (&ImageGenerator{URL: srv.URL, APIKey: "sk-img"}).Generate(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if mime != "image/gif" || string(data) != string(img) {
		t.Errorf("Generate = %d bytes, %s", len(data), mime)
	}
	if got := srv.auths["GET /files/pic"]; got != "Bearer sk-img" {
		t.Errorf("the server's own file was fetched with Authorization %q, want the key", got)
	}
}

func TestGenerateNeverSendsTheKeyToAnotherOrigin(t *testing.T) {
	t.Parallel()
	img := hostile.PNGOf(4, 4)
	var gotAuth string
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		w.Write(img)
	}))
	t.Cleanup(cdn.Close)
	srv := newImageServer(t, http.StatusOK, func(string) string { return `{"data":[{"url":"` + cdn.URL + `/x.png"}]}` }, nil)
	if _, _, err := (&ImageGenerator{URL: srv.URL, APIKey: "sk-img"}).Generate(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	if gotAuth != "" {
		t.Errorf("another origin got Authorization %q", gotAuth)
	}
}

func TestGenerateDecodesADataURL(t *testing.T) {
	t.Parallel()
	img := hostile.PNGOf(3, 3)
	srv := newImageServer(t, http.StatusOK, func(string) string {
		return `{"data":[{"url":"data:image/png;base64,` + base64.StdEncoding.EncodeToString(img) + `"}]}`
	}, nil)
	data, mime, err := (&ImageGenerator{URL: srv.URL}).Generate(context.Background(), "x")
	if err != nil || mime != "image/png" || string(data) != string(img) {
		t.Errorf("Generate = %d bytes, %s, %v", len(data), mime, err)
	}
}

func TestGenerateRefusesWhatIsNotARasterImage(t *testing.T) {
	t.Parallel()
	tests := map[string][]byte{
		"HTML":                 []byte("<!doctype html><html><script>alert(1)</script></html>"),
		"SVG":                  []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`),
		"a bomb header":        hostile.PNGHeader(100_000, 100_000),
		"a broken PNG":         append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 32)...),
		"a PDF":                hostile.PDFPages("BT (x) Tj ET"),
		"plain words in image": []byte("sorry, no image"),
	}
	for name, reply := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := newImageServer(t, http.StatusOK, b64Reply(reply), nil)
			if _, _, err := (&ImageGenerator{URL: srv.URL}).Generate(context.Background(), "x"); !errors.Is(err, ErrNotImage) {
				t.Errorf("Generate = %v, want ErrNotImage", err)
			}
		})
	}
}

func TestGenerateReportsServerErrorsAndOddReplies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		reply  string
		want   string
	}{
		{"an error status", 400, `{"error":{"message":"Your request was rejected by the safety system."}}`,
			"image server answered 400 Bad Request: Your request was rejected by the safety system."},
		{"a reply that is not JSON", 200, "<html>proxy login</html>", "not JSON"},
		{"no images", 200, `{"data":[]}`, "holds no image"},
		{"neither form", 200, `{"data":[{}]}`, "neither b64_json nor url"},
		{"bad base64", 200, `{"data":[{"b64_json":"!!!"}]}`, "not base64"},
		{"a file: URL", 200, `{"data":[{"url":"file:///etc/passwd"}]}`, "not http(s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newImageServer(t, tt.status, func(string) string { return tt.reply }, nil)
			_, _, err := (&ImageGenerator{URL: srv.URL, APIKey: "sk-hidden"}).Generate(context.Background(), "x")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Generate = %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "sk-hidden") {
				t.Errorf("error %q shows the key", err)
			}
		})
	}
}

func TestGenerateStopsAtTheSizeCap(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			fmt.Fprintf(w, `{"data":[{"url":"http://%s/big"}]}`, r.Host)
			return
		}
		w.Write([]byte("\x89PNG\r\n\x1a\n"))
		io.CopyN(w, zeros{}, maxImageBytes)
	}))
	t.Cleanup(srv.Close)
	if _, _, err := (&ImageGenerator{URL: srv.URL}).Generate(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "over the limit of 30 MB") {
		t.Errorf("Generate = %v, want over the limit", err)
	}
}

func TestGenerateNeedsAPrompt(t *testing.T) {
	t.Parallel()
	if _, _, err := (&ImageGenerator{URL: "http://127.0.0.1:1"}).Generate(context.Background(), "  "); err == nil {
		t.Error("Generate with a blank prompt succeeded")
	}
}
