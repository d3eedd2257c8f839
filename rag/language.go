package rag

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"weft/db"
)

// A knowledge base's language is the text-search configuration its chunks
// are stemmed with (english by default: "files" finds "file"). Choosing
// another indexes every chunk again, in the background (LanguageArgs).

// LanguageArgs is the job that indexes a knowledge base's chunks again in
// its pending language.
type LanguageArgs struct {
	KBID int64 `json:"kb_id"`
}

// Kind names the job for River.
func (LanguageArgs) Kind() string { return "kb_language" }

type languageWorker struct {
	river.WorkerDefaults[LanguageArgs]
	s *Service
}

// Timeout lets a large knowledge base be indexed again in one go (River's
// default is a minute).
func (w *languageWorker) Timeout(*river.Job[LanguageArgs]) time.Duration { return time.Hour }

func (w *languageWorker) Work(ctx context.Context, job *river.Job[LanguageArgs]) error {
	return w.s.store.SwitchLanguage(ctx, job.Args.KBID)
}

// setLanguage starts moving a knowledge base to another language (one of
// db.Languages, checked by UpdateSettings); the same language as now (or as
// already pending) does nothing.
func (s *Service) setLanguage(ctx context.Context, user int64, kb db.KnowledgeBase, lang string) error {
	if lang == "" || lang == kb.PendingLanguage || lang == kb.Language && kb.PendingLanguage == "" {
		return nil
	}
	return s.store.StartLanguage(ctx, user, kb.ID, lang, func(tx pgx.Tx) error {
		return s.jobs.InsertTx(ctx, tx, LanguageArgs{KBID: kb.ID}, &river.InsertOpts{MaxAttempts: ingestAttempts})
	})
}
