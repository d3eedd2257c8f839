package media

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// Speaker reads text aloud.
type Speaker interface {
	Speak(ctx context.Context, text string) (audio []byte, mime string, err error)
}

var (
	_ Speaker = (*Espeak)(nil)
	_ Speaker = (*OpenAISpeech)(nil)
)

// ErrNothingToSay is returned for text that is blank.
var ErrNothingToSay = errors.New("media: nothing to read aloud")

// Espeak speaks with the local espeak-ng program (a Debian package that
// scripts/deps.sh installs). It is robotic but always there.
type Espeak struct {
	Bin      string // program; default "espeak-ng"
	Voice    string // espeak-ng voice; default "en"
	MaxChars int    // longer text is cut at a sentence end; default 20,000
}

// Espeak defaults.
const (
	DefaultEspeakBin      = "espeak-ng"
	DefaultEspeakVoice    = "en"
	DefaultEspeakMaxChars = 20_000
)

// maxEspeakOutput bounds the WAV read from espeak-ng (about 40 minutes at
// its 22 kHz, 16-bit mono).
const maxEspeakOutput = 100 << 20

// voiceName is what a voice may look like ("en", "en-us", "en+f3",
// "mb/mb-en1"): never an option, never a path out of espeak's data.
var voiceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_+/-]{0,63}$`)

// Speak runs `espeak-ng -v VOICE --stdout` with the text on its standard
// input — never as an argument, where text starting with "-" would be an
// option — and returns a WAV file (audio/wav).
func (e *Espeak) Speak(ctx context.Context, text string) ([]byte, string, error) {
	bin, voice, maxChars := e.Bin, e.Voice, e.MaxChars
	if bin == "" {
		bin = DefaultEspeakBin
	}
	if voice == "" {
		voice = DefaultEspeakVoice
	}
	if maxChars <= 0 {
		maxChars = DefaultEspeakMaxChars
	}
	if !voiceName.MatchString(voice) || strings.Contains(voice, "..") {
		return nil, "", fmt.Errorf("media: espeak-ng voice %q is not a voice name", voice)
	}
	text = strings.TrimSpace(truncateRunes(text, maxChars))
	if text == "" {
		return nil, "", ErrNothingToSay
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, "", fmt.Errorf("espeak-ng is not installed on the server (install the Debian package espeak-ng, e.g. with scripts/deps.sh), or read-aloud must use a speech server: %w", err)
	}
	cmd := exec.CommandContext(ctx, path, "-v", voice, "--stdout")
	cmd.Stdin = strings.NewReader(text)
	out := &cappedBuffer{max: maxEspeakOutput}
	stderr := &cappedBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = out, stderr
	cmd.WaitDelay = 2 * time.Second // after ctx kills it, do not wait on its pipes for ever
	if err := cmd.Run(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, "", ctxErr
		}
		if out.over {
			return nil, "", fmt.Errorf("media: espeak-ng wrote more than %s of audio", readableSize(maxEspeakOutput))
		}
		return nil, "", fmt.Errorf("media: espeak-ng failed: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	wav := out.Bytes()
	if len(wav) < 44 || string(wav[:4]) != "RIFF" || string(wav[8:12]) != "WAVE" {
		return nil, "", fmt.Errorf("media: espeak-ng did not write a WAV file: %s", strings.TrimSpace(stderr.String()))
	}
	fixWAVSizes(wav)
	return wav, "audio/wav", nil
}

// fixWAVSizes writes the real RIFF and data chunk sizes into a WAV header:
// writing to a pipe, espeak-ng cannot seek back and leaves placeholders,
// which make browsers show a wrong duration.
func fixWAVSizes(wav []byte) {
	binary.LittleEndian.PutUint32(wav[4:], uint32(len(wav)-8))
	for i := 12; i+8 <= len(wav); {
		size := int(binary.LittleEndian.Uint32(wav[i+4:]))
		if string(wav[i:i+4]) == "data" {
			binary.LittleEndian.PutUint32(wav[i+4:], uint32(len(wav)-i-8))
			return
		}
		if size < 0 || size > len(wav) {
			return
		}
		i += 8 + size + size%2
	}
}

// cappedBuffer keeps at most max bytes and fails the write beyond them,
// which stops the program writing.
type cappedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		b.over = true
		return 0, errors.New("output over the limit")
	}
	return b.Buffer.Write(p)
}

// OpenAISpeech speaks through a server with OpenAI's speech API (OpenAI
// itself, or a local one such as Kokoro-FastAPI or openedai-speech).
type OpenAISpeech struct {
	URL    string // base, e.g. http://host:8000; requests go to URL+"/v1/audio/speech"
	APIKey string // sent as a Bearer token when set
	Model  string // e.g. "tts-1", "kokoro"; left out of the request when empty
	Voice  string // e.g. "alloy", "af_heart"; left out when empty
	Client *http.Client
}

// maxSpeechBytes bounds a speech server's reply.
const maxSpeechBytes = 50 << 20

// Speak asks the server for MP3 and returns what it sent, whose type is
// sniffed from its bytes (MP3, WAV, Ogg or FLAC), never taken from its
// headers. The time it may take is ctx's.
func (s *OpenAISpeech) Speak(ctx context.Context, text string) ([]byte, string, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, "", ErrNothingToSay
	}
	body, err := json.Marshal(struct {
		Model          string `json:"model,omitempty"` // empty: the server's default
		Input          string `json:"input"`
		Voice          string `json:"voice,omitempty"`
		ResponseFormat string `json:"response_format"`
	}{s.Model, text, s.Voice, "mp3"})
	if err != nil {
		return nil, "", err
	}
	c := remote{what: "speech server", base: s.URL, apiKey: s.APIKey, client: s.Client}
	audio, err := c.post(ctx, "/v1/audio/speech", body, maxSpeechBytes)
	if err != nil {
		return nil, "", err
	}
	mime := audioMIME(audio)
	if mime == "" {
		return nil, "", fmt.Errorf("media: the speech server's reply is not audio (%s starting %q)", readableSize(int64(len(audio))), printable(audio[:min(len(audio), 16)]))
	}
	return audio, mime, nil
}

// audioMIME recognizes MP3, WAV, Ogg and FLAC by their first bytes, or
// gives "".
func audioMIME(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("ID3")):
		return "audio/mpeg"
	case len(b) >= 2 && b[0] == 0xff && b[1]&0xe0 == 0xe0 && b[1]&0x06 != 0: // MPEG frame sync, layer set (not AAC's 00)
		return "audio/mpeg"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE":
		return "audio/wav"
	case bytes.HasPrefix(b, []byte("OggS")):
		return "audio/ogg"
	case bytes.HasPrefix(b, []byte("fLaC")):
		return "audio/flac"
	}
	return ""
}
