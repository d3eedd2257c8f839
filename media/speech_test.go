package media

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// These run wherever the tests run: scripts/deps.sh (make test) installs
// espeak-ng.

func TestEspeakReadsTextIntoAWAVFile(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	audio, mime, err := (&Espeak{}).Speak(ctx, "Hello from Weft. This is read aloud.")
	if err != nil {
		t.Fatal(err)
	}
	if mime != "audio/wav" || len(audio) < 1000 || string(audio[:4]) != "RIFF" || string(audio[8:12]) != "WAVE" {
		t.Fatalf("Speak = %d bytes starting %q, %s; want a WAV file", len(audio), audio[:min(len(audio), 12)], mime)
	}
	if size := binary.LittleEndian.Uint32(audio[4:]); int(size) != len(audio)-8 {
		t.Errorf("RIFF size %d, want %d (the real length, not espeak's placeholder)", size, len(audio)-8)
	}
	if i := strings.Index(string(audio[:200]), "data"); i < 0 || int(binary.LittleEndian.Uint32(audio[i+4:])) != len(audio)-i-8 {
		t.Errorf("data chunk size not fixed")
	}
}

func TestEspeakReadsTextThatLooksLikeAnOptionAsText(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// As an argument, "--help" would print usage and "-w /path" would
	// write a file; on stdin it is just words.
	audio, _, err := (&Espeak{}).Speak(ctx, "--help -w /tmp/owned.wav")
	if err != nil {
		t.Fatal(err)
	}
	if string(audio[:4]) != "RIFF" || len(audio) < 1000 {
		t.Errorf("Speak = %q…, want audio", audio[:min(len(audio), 16)])
	}
}

func TestEspeakRefusesBadVoicesAndBlankText(t *testing.T) {
	t.Parallel()
	for _, voice := range []string{"--stdout", "-w/tmp/x", "../../etc/passwd", "en us", "en;rm"} {
		if _, _, err := (&Espeak{Voice: voice}).Speak(context.Background(), "hi"); err == nil || !strings.Contains(err.Error(), "not a voice name") {
			t.Errorf("voice %q: %v, want refused", voice, err)
		}
	}
	if _, _, err := (&Espeak{}).Speak(context.Background(), " \n "); !errors.Is(err, ErrNothingToSay) {
		t.Errorf("blank text: %v, want ErrNothingToSay", err)
	}
}

func TestEspeakMissingSaysItIsNotInstalled(t *testing.T) {
	t.Parallel()
	_, _, err := (&Espeak{Bin: "/nonexistent/espeak-ng"}).Speak(context.Background(), "hi")
	if err == nil || !strings.HasPrefix(err.Error(), "espeak-ng is not installed on the server") {
		t.Errorf("Speak = %v, want a clear 'not installed'", err)
	}
}

func TestEspeakStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := (&Espeak{}).Speak(ctx, "Never said."); !errors.Is(err, context.Canceled) {
		t.Errorf("Speak = %v, want context.Canceled", err)
	}
}

// speechServer fakes an OpenAI speech endpoint; it records the request.
type speechServer struct {
	*httptest.Server
	auth string
	body map[string]any
	path string
}

func newSpeechServer(t *testing.T, status int, reply []byte) *speechServer {
	s := &speechServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.auth, s.path = r.Header.Get("Authorization"), r.Method+" "+r.URL.Path
		json.NewDecoder(r.Body).Decode(&s.body)
		w.Header().Set("Content-Type", "audio/mpeg") // never trusted
		w.WriteHeader(status)
		w.Write(reply)
	}))
	t.Cleanup(s.Close)
	return s
}

func TestOpenAISpeechSendsTheTextAndSniffsTheAudio(t *testing.T) {
	t.Parallel()
	mp3 := append([]byte("ID3\x04\x00\x00\x00\x00\x00\x00"), make([]byte, 100)...)
	tests := []struct {
		name  string
		reply []byte
		mime  string
	}{
		{"MP3 with an ID3 tag", mp3, "audio/mpeg"},
		{"MP3 frames", append([]byte{0xff, 0xfb, 0x90, 0x00}, make([]byte, 100)...), "audio/mpeg"},
		{"WAV", append([]byte("RIFF\x00\x00\x00\x00WAVEfmt "), make([]byte, 40)...), "audio/wav"},
		{"Ogg", append([]byte("OggS"), make([]byte, 40)...), "audio/ogg"},
		{"FLAC", append([]byte("fLaC"), make([]byte, 40)...), "audio/flac"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newSpeechServer(t, http.StatusOK, tt.reply)
			s := &OpenAISpeech{URL: srv.URL + "/", APIKey: "sk-test", Model: "tts-1", Voice: "alloy"}
			audio, mime, err := s.Speak(context.Background(), "Read this.")
			if err != nil {
				t.Fatal(err)
			}
			if mime != tt.mime || string(audio) != string(tt.reply) {
				t.Errorf("Speak = %d bytes, %s; want %s", len(audio), mime, tt.mime)
			}
			if srv.path != "POST /v1/audio/speech" || srv.auth != "Bearer sk-test" {
				t.Errorf("request %s with Authorization %q", srv.path, srv.auth)
			}
			want := map[string]any{"model": "tts-1", "input": "Read this.", "voice": "alloy", "response_format": "mp3"}
			for k, v := range want {
				if srv.body[k] != v {
					t.Errorf("body[%s] = %v, want %v", k, srv.body[k], v)
				}
			}
		})
	}
}

func TestOpenAISpeechSendsOnlyWhatIsSet(t *testing.T) {
	t.Parallel()
	srv := newSpeechServer(t, http.StatusOK, []byte("OggS...."))
	// A base written with /v1, as OpenAI's often is, means the same.
	if _, _, err := (&OpenAISpeech{URL: srv.URL + "/v1"}).Speak(context.Background(), "hi"); err != nil {
		t.Fatal(err)
	}
	if srv.auth != "" || srv.path != "POST /v1/audio/speech" {
		t.Errorf("request %s with Authorization %q", srv.path, srv.auth)
	}
	if _, ok := srv.body["model"]; ok {
		t.Errorf("an empty model was sent: %v", srv.body)
	}
	if _, ok := srv.body["voice"]; ok {
		t.Errorf("an empty voice was sent: %v", srv.body)
	}
}

func TestOpenAISpeechErrorsSayWhatTheServerSaidWithoutSecrets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		reply  string
		want   string
	}{
		{"an OpenAI error", 401, `{"error":{"message":"Incorrect API key provided: sk-secret.","type":"invalid_request_error"}}`,
			"speech server answered 401 Unauthorized: Incorrect API key provided: [key]."},
		{"a FastAPI error", 422, `{"detail":"voice not found"}`, "answered 422 Unprocessable Entity: voice not found"},
		{"plain text, capped", 500, strings.Repeat("boom ", 1000), "answered 500 Internal Server Error: boom boom"},
		{"an empty body", 503, "", "answered 503 Service Unavailable: (no message)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newSpeechServer(t, tt.status, []byte(tt.reply))
			_, _, err := (&OpenAISpeech{URL: srv.URL, APIKey: "sk-secret"}).Speak(context.Background(), "hi")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Speak = %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "sk-secret") || len(err.Error()) > 400 {
				t.Errorf("error %q leaks the key or is too long", err)
			}
		})
	}
}

func TestOpenAISpeechRefusesWhatIsNotAudio(t *testing.T) {
	t.Parallel()
	srv := newSpeechServer(t, http.StatusOK, []byte("<html>Login</html>"))
	if _, _, err := (&OpenAISpeech{URL: srv.URL}).Speak(context.Background(), "hi"); err == nil || !strings.Contains(err.Error(), "not audio") {
		t.Errorf("Speak = %v, want 'not audio'", err)
	}
}

func TestOpenAISpeechStopsAtTheSizeCap(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ID3"))
		io.CopyN(w, zeros{}, maxSpeechBytes+10) // no Content-Length: streamed
	}))
	t.Cleanup(srv.Close)
	if _, _, err := (&OpenAISpeech{URL: srv.URL}).Speak(context.Background(), "hi"); err == nil || !strings.Contains(err.Error(), "over the limit of 50 MB") {
		t.Errorf("Speak = %v, want over the limit", err)
	}
}

func TestOpenAISpeechGivesUpWithItsContext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := (&OpenAISpeech{URL: srv.URL}).Speak(ctx, "hi"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Speak = %v, want context.DeadlineExceeded", err)
	}
}

func TestSpeechServerURLMustBeHTTP(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "file:///etc/passwd", "localhost:8000", "ftp://x"} {
		if _, _, err := (&OpenAISpeech{URL: u}).Speak(context.Background(), "hi"); err == nil || !strings.Contains(err.Error(), "must be an http(s) address") {
			t.Errorf("URL %q: %v", u, err)
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
