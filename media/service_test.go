package media

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"weft/db"
)

// queueStore is the part of the store that queueing media uses.
type queueStore struct {
	Store
	media map[int64]db.Media
}

func (s *queueStore) Setting(ctx context.Context, key, def string) (string, error) { return def, nil }

func (s *queueStore) AddMedia(ctx context.Context, user, msg int64, kind, prompt, engine string, maxPending int) (db.Media, error) {
	m := db.Media{ID: int64(len(s.media) + 1), MessageID: msg, Kind: kind, Status: db.MediaPending, Engine: engine, CreatedAt: time.Now()}
	s.media[m.ID] = m
	return m, nil
}

func (s *queueStore) FinishMedia(ctx context.Context, id int64, ready *db.MediaReadyInfo, failure string) (db.Media, error) {
	m, ok := s.media[id]
	if !ok {
		return db.Media{}, db.ErrNotFound
	}
	m.Status, m.Error = db.MediaFailed, failure
	s.media[id] = m
	return m, nil
}

type brokenQueue struct{}

func (brokenQueue) Register(func(*river.Workers) error, ...*river.PeriodicJob) error { return nil }

func (brokenQueue) Insert(context.Context, river.JobArgs, *river.InsertOpts) error {
	return errors.New("pq: connection refused")
}

// Media whose job could not be queued is failed at once, with a message
// for the user, instead of waiting for a job that will never run.
func TestMediaThatCannotBeQueuedFailsOnTheMedia(t *testing.T) {
	st := &queueStore{media: map[int64]db.Media{}}
	s, err := NewService(st, brokenQueue{}, Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	md, err := s.ReadAloud(ctx, 1, 10)
	if err != nil {
		t.Fatalf("read aloud: %v", err)
	}
	if md.Status != db.MediaFailed || md.Error != queueFailure || st.media[md.ID].Status != db.MediaFailed {
		t.Errorf("read aloud that could not be queued: %+v", md)
	}

	img, _ := st.AddMedia(ctx, 1, 11, db.MediaImage, "a lighthouse", "openai", 0)
	if err := s.QueueImage(ctx, img.ID); err != nil {
		t.Fatalf("queue image: %v", err)
	}
	if got := st.media[img.ID]; got.Status != db.MediaFailed || got.Error != queueFailure {
		t.Errorf("an image that could not be queued: %+v", got)
	}
}

// A generated "image" that is no image (an SVG, say) is described in plain
// words, not with the wrapped errors' prefixes.
func TestAnImageServerReplyThatIsNotAnImageIsDescribedAsSuch(t *testing.T) {
	_, sniffErr := Sniff("generated image", []byte(`<svg xmlns="http://www.w3.org/2000/svg"></svg>`))
	if got := describe(fmt.Errorf("%w: %w", ErrNotImage, sniffErr)); got != "The image server's reply is not an image." {
		t.Errorf("describe = %q", got)
	}
}
