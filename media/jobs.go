package media

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"time"

	"github.com/riverqueue/river"

	"weft/db"
	"weft/internal/usererr"
)

// SpeechArgs is the job that reads a message aloud.
type SpeechArgs struct {
	MediaID int64 `json:"media_id"`
}

// Kind names the job.
func (SpeechArgs) Kind() string { return "media_speech" }

// ImageArgs is the job that generates an image.
type ImageArgs struct {
	MediaID int64 `json:"media_id"`
}

// Kind names the job.
func (ImageArgs) Kind() string { return "media_image" }

// CollectArgs is the periodic job that removes orphaned files.
type CollectArgs struct{}

// Kind names the job.
func (CollectArgs) Kind() string { return "media_collect" }

// addWorkers adds the media workers to the job queue's bundle.
func (s *Service) addWorkers(w *river.Workers) error {
	if err := river.AddWorkerSafely(w, &speechWorker{s: s}); err != nil {
		return err
	}
	if err := river.AddWorkerSafely(w, &imageWorker{s: s}); err != nil {
		return err
	}
	return river.AddWorkerSafely(w, &collectWorker{s: s})
}

// collectEvery is the periodic clean-up, run on start too.
func (s *Service) collectEvery() *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(s.cfg.GCEvery),
		func() (river.JobArgs, *river.InsertOpts) { return CollectArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true})
}

type speechWorker struct {
	river.WorkerDefaults[SpeechArgs]
	s *Service
}

func (w *speechWorker) Timeout(*river.Job[SpeechArgs]) time.Duration { return 3 * time.Minute }

func (w *speechWorker) Work(ctx context.Context, job *river.Job[SpeechArgs]) error {
	return w.s.generate(ctx, job.Args.MediaID, func(ctx context.Context, j db.MediaJob, st Settings) (*db.MediaReadyInfo, error) {
		text := SpeakableText(j.Text)
		if text == "" {
			return nil, userError("This answer has no text to read aloud.")
		}
		var sp Speaker = &Espeak{Bin: w.s.cfg.EspeakBin}
		if st.TTSEngine == "openai" {
			sp = &OpenAISpeech{URL: st.TTSURL, APIKey: st.TTSKey, Model: st.TTSModel, Voice: st.TTSVoice, Client: w.s.cfg.HTTP}
		}
		audio, mime, err := sp.Speak(ctx, text)
		if err != nil {
			return nil, err
		}
		sha, err := w.s.put(audio)
		if err != nil {
			return nil, err
		}
		return &db.MediaReadyInfo{SHA256: sha, MIME: mime, Size: int64(len(audio))}, nil
	})
}

type imageWorker struct {
	river.WorkerDefaults[ImageArgs]
	s *Service
}

func (w *imageWorker) Timeout(*river.Job[ImageArgs]) time.Duration { return 5 * time.Minute }

func (w *imageWorker) Work(ctx context.Context, job *river.Job[ImageArgs]) error {
	return w.s.generate(ctx, job.Args.MediaID, func(ctx context.Context, j db.MediaJob, st Settings) (*db.MediaReadyInfo, error) {
		if st.ImageURL == "" {
			return nil, userError("Image generation is not configured on this server.")
		}
		g := &ImageGenerator{URL: st.ImageURL, APIKey: st.ImageKey, Model: st.ImageModel, Size: st.ImageSize, Client: w.s.cfg.HTTP}
		data, mime, err := g.Generate(ctx, j.Media.Prompt)
		if err != nil {
			return nil, err
		}
		thumb, err := Thumbnail(ctx, data, 0)
		if err != nil {
			return nil, err
		}
		info := &db.MediaReadyInfo{MIME: mime, Size: int64(len(data))}
		if info.ThumbSHA, err = w.s.put(thumb); err != nil {
			return nil, err
		}
		if info.SHA256, err = w.s.put(data); err != nil {
			return nil, err
		}
		return info, nil
	})
}

// userError is a failure whose text is shown on the media as is.
func userError(msg string) error { return usererr.New(msg) }

// generate runs one generation and records its outcome on the media (a
// failure shows there, never on the message's text). The job itself
// succeeds either way: the media row holds the outcome.
func (s *Service) generate(ctx context.Context, id int64, fn func(context.Context, db.MediaJob, Settings) (*db.MediaReadyInfo, error)) error {
	j, err := s.store.MediaForJob(ctx, id)
	if errors.Is(err, db.ErrNotFound) {
		return nil // deleted with its message meanwhile
	}
	if err != nil {
		return err
	}
	st, err := s.Settings(ctx)
	if err != nil {
		return err
	}
	info, genErr := fn(ctx, j, st)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if genErr != nil {
		msg := describe(genErr)
		slog.Warn("media generation failed", "media", id, "kind", j.Media.Kind, "err", genErr)
		_, err = s.store.FinishMedia(wctx, id, nil, msg)
	} else {
		_, err = s.store.FinishMedia(wctx, id, info, "")
	}
	if errors.Is(err, db.ErrNotFound) {
		return nil
	}
	return err
}

// describe turns a generation failure into a message for the user: what
// the engine said when it answered, never addresses or internals. Errors
// are told apart by type (remote.go's remoteError, refusals, usererr),
// never by their text.
func describe(err error) string {
	switch {
	case errors.Is(err, ErrNotImage): // before the refusal of what came back, which it wraps
		return "The image server's reply is not an image."
	case errors.Is(err, ErrNothingToSay):
		return "This answer has no text to read aloud."
	case errors.Is(err, exec.ErrNotFound):
		return "espeak-ng is not installed on the server: an admin can install it, or set up a speech endpoint on /admin."
	case errors.Is(err, context.DeadlineExceeded):
		return "Generating took too long and was stopped."
	}
	return usererr.Or(err, "Generating failed on the server.")
}

type collectWorker struct {
	river.WorkerDefaults[CollectArgs]
	s *Service
}

func (w *collectWorker) Work(ctx context.Context, job *river.Job[CollectArgs]) error {
	_, err := w.s.Collect(ctx)
	return err
}

// Report is what one collection removed.
type Report struct {
	At       time.Time `json:"at"`
	Expired  int64     `json:"expired"`  // attachments never sent
	Stale    int64     `json:"stale"`    // pending media whose job was lost, now failed
	Removed  int       `json:"removed"`  // files no attachment or media uses
	Bytes    int64     `json:"bytes"`    // their size
	Temp     int       `json:"temp"`     // leftovers of interrupted writes
	Kept     int       `json:"kept"`     // files in use
	Recently int       `json:"recently"` // unused files younger than the grace period
}

const reportKey = "media_gc_report"

// Collect removes attachments never sent and files nothing references
// (older than UnsentAfter: a file stored for a message being sent is
// referenced a moment later), fails media whose job was lost (pending for
// longer than StaleAfter), and records what it did.
func (s *Service) Collect(ctx context.Context) (Report, error) {
	r := Report{At: time.Now().UTC()}
	var err error
	if r.Expired, err = s.store.ExpireUnsentAttachments(ctx, s.cfg.UnsentAfter); err != nil {
		return r, fmt.Errorf("expire unsent attachments: %w", err)
	}
	if r.Stale, err = s.store.FailStaleMedia(ctx, s.cfg.StaleAfter, StaleFailure); err != nil {
		return r, fmt.Errorf("fail stale media: %w", err)
	}
	refs, err := s.store.ReferencedBlobs(ctx)
	if err != nil {
		return r, fmt.Errorf("referenced files: %w", err)
	}
	cutoff := time.Now().Add(-s.cfg.UnsentAfter)
	err = s.Blobs.Walk(func(sha string, size int64, mod time.Time) error {
		switch {
		case refs[sha]:
			r.Kept++
		case mod.After(cutoff):
			r.Recently++
		default:
			if err := s.Blobs.Remove(sha); err != nil {
				return err
			}
			r.Removed++
			r.Bytes += size
		}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("walk files: %w", err)
	}
	if r.Temp, err = s.Blobs.CleanTemp(time.Hour); err != nil {
		return r, fmt.Errorf("clean temporary files: %w", err)
	}
	slog.Info("media collected", "expired_attachments", r.Expired, "stale_media", r.Stale, "removed_files", r.Removed, "removed_bytes", r.Bytes,
		"temp_files", r.Temp, "kept", r.Kept, "recent_unused", r.Recently)
	if b, err := json.Marshal(r); err == nil {
		_ = s.store.SetSetting(ctx, reportKey, string(b))
	}
	return r, nil
}

// LastReport returns the last collection's report (zero when none ran).
func (s *Service) LastReport(ctx context.Context) Report {
	var r Report
	if v, err := s.store.Setting(ctx, reportKey, "{}"); err == nil {
		_ = json.Unmarshal([]byte(v), &r)
	}
	return r
}

// releaseGrace spares, in Release, a blob stored (or stored again, which
// refreshes its time) this recently: a send or a generation that put it is
// about to reference it, and its transaction may not have committed when
// Release asks which blobs are referenced. The collector takes such a blob
// later if nothing references it by then.
const releaseGrace = 10 * time.Minute

// Release removes, at once, the files of deleted messages that nothing
// references any more and that were not stored again a moment ago.
func (s *Service) Release(ctx context.Context, shas []string) {
	if len(shas) == 0 {
		return
	}
	refs, err := s.store.StillReferenced(ctx, shas)
	if err != nil {
		slog.Warn("release files", "err", err)
		return
	}
	cutoff := time.Now().Add(-min(releaseGrace, s.cfg.UnsentAfter))
	for _, sha := range shas {
		if refs[sha] || s.recent(sha, cutoff) {
			continue
		}
		if err := s.Blobs.Remove(sha); err != nil {
			slog.Warn("release file", "err", err)
		}
	}
}

// recent reports whether a stored blob was written or refreshed after
// cutoff.
func (s *Service) recent(sha string, cutoff time.Time) bool {
	f, err := s.Blobs.Open(sha)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	return err == nil && fi.ModTime().After(cutoff)
}
