package media

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"weft/db"
	"weft/extract"
)

// Store is what the media service needs from the database.
type Store interface {
	MediaForJob(ctx context.Context, id int64) (db.MediaJob, error)
	FinishMedia(ctx context.Context, id int64, ready *db.MediaReadyInfo, failure string) (db.Media, error)
	FailStaleMedia(ctx context.Context, olderThan time.Duration, msg string) (int64, error)
	AddMedia(ctx context.Context, user, msg int64, kind, prompt, engine string, maxPending int) (db.Media, error)
	ReferencedBlobs(ctx context.Context) (map[string]bool, error)
	StillReferenced(ctx context.Context, shas []string) (map[string]bool, error)
	ExpireUnsentAttachments(ctx context.Context, olderThan time.Duration) (int64, error)
	Setting(ctx context.Context, key, def string) (string, error)
	SetSetting(ctx context.Context, key, value string) error
	Thread(ctx context.Context, user, id int64) (db.Thread, error)
	Message(ctx context.Context, user, id int64) (db.Message, error)
}

// Jobs is the shared job queue (internal/jobs) as media uses it: its
// workers and periodic clean-up are added when the service is built, and
// generations are inserted in Queue.
type Jobs interface {
	Register(add func(*river.Workers) error, periodic ...*river.PeriodicJob) error
	Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) error
}

// Config tunes the service.
type Config struct {
	DataDir     string        // blobs live in DataDir/blobs, unless Store is set
	Store       BlobStore     // where blobs live (nil: Blobs under DataDir/blobs)
	Limits      Limits        // per file and per message
	GCEvery     time.Duration // how often orphans are collected (default 1 h)
	UnsentAfter time.Duration // unreferenced files are kept this long (default 24 h)
	StaleAfter  time.Duration // media still pending this long has lost its job and is failed (default 30 min)
	EspeakBin   string        // default "espeak-ng"
	// Workers is how many media jobs one instance runs at once (default 2):
	// the size of Queue, which the application gives the job queue.
	Workers int
	// MaxPendingPerUser is how many read-aloud and image generations one
	// user may have waiting or running at once (default 5).
	MaxPendingPerUser int
	HTTP              *http.Client // for the OpenAI-compatible endpoints (default: 5 min timeout)
}

// Service stores attachments and generates media in the background.
type Service struct {
	store Store
	Blobs BlobStore
	cfg   Config
	jobs  Jobs
}

// NewService returns the media service, its workers registered on jobs;
// they run once the queue starts.
func NewService(store Store, jobs Jobs, cfg Config) (*Service, error) {
	if cfg.GCEvery <= 0 {
		cfg.GCEvery = time.Hour
	}
	if cfg.UnsentAfter <= 0 {
		cfg.UnsentAfter = 24 * time.Hour
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 30 * time.Minute
	}
	if cfg.EspeakBin == "" {
		cfg.EspeakBin = "espeak-ng"
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 5 * time.Minute}
	}
	if cfg.MaxPendingPerUser <= 0 {
		cfg.MaxPendingPerUser = 5
	}
	blobs := cfg.Store
	if blobs == nil {
		blobs = &Blobs{Dir: filepath.Join(cfg.DataDir, "blobs")}
	}
	s := &Service{store: store, Blobs: blobs, cfg: cfg, jobs: jobs}
	if err := jobs.Register(s.addWorkers, s.collectEvery()); err != nil {
		return nil, err
	}
	return s, nil
}

// Queue is the job queue of media generations: apart from ingestion's, so
// that one user's many read-aloud requests cannot starve everyone's uploads.
const Queue = "media"

// MaxPending is how many generations one user may have pending at once.
func (s *Service) MaxPending() int { return s.cfg.MaxPendingPerUser }

// Limits returns the attachment limits.
func (s *Service) Limits() Limits { return s.cfg.Limits.withDefaults() }

// Settings is what an admin configures: the read-aloud engine and the
// image generation endpoint.
type Settings struct {
	TTSEngine  string `json:"tts_engine"` // "espeak" (default) or "openai"
	TTSURL     string `json:"tts_url"`
	TTSKey     string `json:"tts_key"`
	TTSModel   string `json:"tts_model"`
	TTSVoice   string `json:"tts_voice"`
	ImageURL   string `json:"image_url"` // "" : image generation is off
	ImageKey   string `json:"image_key"`
	ImageModel string `json:"image_model"`
	ImageSize  string `json:"image_size"`
}

const settingsKey = "media"

// WithKeys sets the API keys of new settings: a key typed in (non-empty)
// is taken; otherwise the stored key of old is kept only while its
// endpoint's address is unchanged, so that a key is never sent to a host
// the admin did not pair it with.
func (st Settings) WithKeys(old Settings, ttsKey, imageKey string) Settings {
	st.TTSKey, st.ImageKey = ttsKey, imageKey
	if st.TTSKey == "" && st.TTSURL == old.TTSURL {
		st.TTSKey = old.TTSKey
	}
	if st.ImageKey == "" && st.ImageURL == old.ImageURL {
		st.ImageKey = old.ImageKey
	}
	return st
}

// Settings returns the media settings.
func (s *Service) Settings(ctx context.Context) (Settings, error) {
	var st Settings
	v, err := s.store.Setting(ctx, settingsKey, "{}")
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal([]byte(v), &st); err != nil {
		return Settings{}, fmt.Errorf("media settings: %w", err)
	}
	if st.TTSEngine == "" {
		st.TTSEngine = "espeak"
	}
	return st, nil
}

// SaveSettings stores the media settings.
func (s *Service) SaveSettings(ctx context.Context, st Settings) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return s.store.SetSetting(ctx, settingsKey, string(b))
}

// ImagesEnabled reports whether an image endpoint is configured.
func (s *Service) ImagesEnabled(ctx context.Context) bool {
	st, err := s.Settings(ctx)
	return err == nil && st.ImageURL != ""
}

// Upload is one file from the composer.
type Upload struct {
	Name string
	Data []byte
	// Size is the file's size as received when Data holds only its
	// beginning (a file over the limit is not read whole); 0: len(Data).
	Size int64
}

// Prepared is a file of the composer checked, sniffed and read, not yet
// stored: its attachment (with the content's hash) and the bytes to store.
type Prepared struct {
	Attachment db.NewAttachment
	data       []byte
	thumb      []byte
}

// Accept checks, sniffs, reads and stores the files of one message; a
// refused file is an error wrapping ErrRefused that names it.
func (s *Service) Accept(ctx context.Context, files []Upload) ([]db.NewAttachment, error) {
	p, err := s.Prepare(ctx, files)
	if err != nil {
		return nil, err
	}
	return s.Store(p)
}

// Prepare checks, sniffs and reads the files of one message, and makes the
// thumbnails, writing nothing: the caller decides (the thread is the
// user's, the model sees images, the user has room) before Store. A
// refused file is an error wrapping ErrRefused that names it.
func (s *Service) Prepare(ctx context.Context, files []Upload) ([]Prepared, error) {
	lim := s.Limits()
	sizes := make([]NamedSize, len(files))
	for i, f := range files {
		sizes[i] = NamedSize{Name: f.Name, Size: max(f.Size, int64(len(f.Data)))}
	}
	if err := lim.Check(sizes); err != nil {
		return nil, err
	}
	out := make([]Prepared, 0, len(files))
	for _, f := range files {
		sn, err := Sniff(f.Name, f.Data)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(f.Data)
		p := Prepared{data: f.Data, Attachment: db.NewAttachment{SHA256: hex.EncodeToString(sum[:]), Name: extract.CleanFileName(f.Name, "file"),
			MIME: sn.MIME, Kind: sn.Kind, Format: sn.Format, Size: int64(len(f.Data)), Width: sn.Width, Height: sn.Height}}
		a := &p.Attachment
		switch sn.Kind {
		case KindDocument:
			if a.Text, a.TextTruncated, err = ExtractText(ctx, sn.Format, f.Data, 0); err != nil {
				return nil, inFile(a.Name, err)
			}
		case KindImage:
			if p.thumb, err = Thumbnail(ctx, f.Data, 0); err != nil {
				return nil, inFile(a.Name, err)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// Store writes prepared files (and their thumbnails) to the blob store.
func (s *Service) Store(files []Prepared) ([]db.NewAttachment, error) {
	out := make([]db.NewAttachment, 0, len(files))
	for _, p := range files {
		a := p.Attachment
		var err error
		if p.thumb != nil {
			if a.ThumbSHA, err = s.put(p.thumb); err != nil {
				return nil, err
			}
		}
		if a.SHA256, err = s.put(p.data); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// put stores a blob (Blobs.Put marks content stored before as fresh, so
// the collector, which keeps unreferenced blobs for UnsentAfter, does not
// take a copy a message is about to reference again).
func (s *Service) put(data []byte) (string, error) {
	sha, err := s.Blobs.Put(data)
	if err != nil {
		return "", fmt.Errorf("store file: %w", err)
	}
	return sha, nil
}

// ReadAloud queues speech for one of the user's assistant messages.
func (s *Service) ReadAloud(ctx context.Context, user, msg int64) (db.Media, error) {
	st, err := s.Settings(ctx)
	if err != nil {
		return db.Media{}, err
	}
	md, err := s.store.AddMedia(ctx, user, msg, db.MediaAudio, "", st.TTSEngine, s.cfg.MaxPendingPerUser)
	if err != nil {
		return db.Media{}, err
	}
	return s.queued(ctx, md, s.enqueue(ctx, SpeechArgs{MediaID: md.ID}))
}

// QueueImage queues the generation of pending image media. When it cannot
// be queued, the media says so (a media failure is never the message's).
func (s *Service) QueueImage(ctx context.Context, media int64) error {
	_, err := s.queued(ctx, db.Media{ID: media}, s.enqueue(ctx, ImageArgs{MediaID: media}))
	return err
}

// queueFailure is shown on media whose job could not be queued.
const queueFailure = "This could not be started on the server. Try again in a moment."

// queued settles media whose job could not be queued as failed, so that it
// does not wait for a job that will never run; the error is returned only
// when even that fails.
func (s *Service) queued(ctx context.Context, md db.Media, enqErr error) (db.Media, error) {
	if enqErr == nil {
		return md, nil
	}
	slog.Warn("queue media job", "media", md.ID, "err", enqErr)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	failed, err := s.store.FinishMedia(wctx, md.ID, nil, queueFailure)
	if err != nil {
		return md, errors.Join(enqErr, err)
	}
	return failed, nil
}

// Stale reports whether media is still pending after StaleAfter: its job
// was lost (a crash, a worker that failed without settling it), and the
// next collection marks it failed.
func (s *Service) Stale(m db.Media) bool {
	return m.Status == db.MediaPending && time.Since(m.CreatedAt) > s.cfg.StaleAfter
}

// StaleFailure is the error shown on media whose job was lost.
const StaleFailure = "This was interrupted on the server and did not finish. Try again."

func (s *Service) enqueue(ctx context.Context, args river.JobArgs) error {
	return s.jobs.Insert(ctx, args, &river.InsertOpts{MaxAttempts: 1, Queue: Queue})
}

// Answered reads a finished answer aloud and draws an image for it when its
// thread asks for that.
func (s *Service) Answered(user, thread, msg int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t, err := s.store.Thread(ctx, user, thread)
	if err != nil {
		return
	}
	if t.TTSEnabled {
		if _, err := s.ReadAloud(ctx, user, msg); err != nil {
			slog.Warn("automatic read-aloud", "message", msg, "err", err)
		}
	}
	if t.ImageEnabled && s.ImagesEnabled(ctx) {
		m, err := s.store.Message(ctx, user, msg)
		if err != nil || m.ParentID == nil {
			return
		}
		q, err := s.store.Message(ctx, user, *m.ParentID)
		if err != nil || strings.TrimSpace(q.Content) == "" {
			return
		}
		prompt := q.Content
		if r := []rune(prompt); len(r) > 4000 {
			prompt = string(r[:4000]) // as /image allows
		}
		md, err := s.store.AddMedia(ctx, user, msg, db.MediaImage, prompt, "openai", s.cfg.MaxPendingPerUser)
		if err == nil {
			err = s.QueueImage(ctx, md.ID)
		}
		if err != nil {
			slog.Warn("automatic image", "message", msg, "err", err)
		}
	}
}
