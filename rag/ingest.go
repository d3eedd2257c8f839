package rag

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/riverqueue/river"

	"weft/db"
	"weft/extract"
	"weft/internal/usererr"
)

// ingestAttempts is how many times a job runs before its document fails
// (each attempt resumes where the previous one stopped).
const ingestAttempts = 6

// IngestArgs is the job that reads, chunks and embeds one document.
type IngestArgs struct {
	DocumentID int64 `json:"document_id"`
}

// Kind names the job in River's table.
func (IngestArgs) Kind() string { return "kb_ingest" }

type ingestWorker struct {
	river.WorkerDefaults[IngestArgs]
	s *Service
}

// permanent marks a failure that another attempt would not fix; msg is
// shown on the document.
type permanent struct{ msg string }

func (p permanent) Error() string { return p.msg }

func (w *ingestWorker) Work(ctx context.Context, job *river.Job[IngestArgs]) error {
	s := w.s
	doc := job.Args.DocumentID
	err := s.ingest(ctx, doc)
	var p permanent
	switch {
	case err == nil:
		return s.store.FinishIngest(context.WithoutCancel(ctx), doc, "")
	case errors.Is(err, db.ErrNotFound):
		return nil // deleted meanwhile, or ingested already (a job run twice)
	case errors.As(err, &p):
		if ferr := s.store.FinishIngest(context.WithoutCancel(ctx), doc, p.msg); ferr != nil {
			return ferr
		}
		return river.JobCancel(err)
	case job.Attempt >= job.MaxAttempts:
		slog.Error("ingestion failed for good", "document", doc, "err", err)
		msg := "Reading this document kept failing (it was tried " + fmt.Sprint(job.MaxAttempts) + " times); the server log has the details. Retry it."
		if m, ok := usererr.Message(err); ok && errors.Is(err, errEmbed) {
			msg = m
		}
		_ = s.store.FinishIngest(context.WithoutCancel(ctx), doc, msg)
		return err
	default:
		slog.Warn("ingestion attempt failed; it will resume", "document", doc, "attempt", job.Attempt, "err", err)
		return err
	}
}

// errEmbed wraps embedding failures that exhausted their retries.
var errEmbed = errors.New("embedding failed")

// ingest does one attempt: read, chunk, and embed the chunks not stored yet.
func (s *Service) ingest(ctx context.Context, docID int64) error {
	t, err := s.store.StartIngest(ctx, docID)
	if err != nil {
		return err
	}
	format, err := extract.Detect(t.Doc.Name, t.Data)
	if err != nil {
		return permanent{msg: usererr.Capitalize(usererr.Or(err, extract.ErrUnsupported.Error())) + "."}
	}
	if err := s.store.SetDocumentFormat(ctx, docID, format); err != nil {
		return err
	}
	// In the jail: a file that makes the reader run out of memory or
	// time, or crash, is a ReadError like any unreadable file, and fails
	// the document for good rather than crashing a child at every retry.
	blocks, err := extract.Read(ctx, format, t.Data, extract.Limits{})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var re *extract.ReadError
		if errors.As(err, &re) || errors.Is(err, extract.ErrUnsupported) {
			return permanent{msg: usererr.Capitalize(usererr.Or(err, extract.ErrUnsupported.Error()))}
		}
		return err // the jail itself failed (no child could start): another attempt may do
	}
	// The chunking fixed when this document was first started: a resumed
	// attempt cuts it the same way even if the settings changed since.
	overlap := t.Doc.ChunkOverlap
	if overlap == 0 {
		overlap = -1 // Split: negative is "none", 0 the default
	}
	chunks := Split(blocks, ChunkOptions{Size: t.Doc.ChunkSize, Overlap: overlap})
	if len(chunks) == 0 {
		msg := "No text was found in this file."
		if format == FormatPDF {
			msg += " A scanned PDF holds images of pages; Weft does not read text in images (OCR)."
		}
		return permanent{msg: msg}
	}
	done, err := s.store.StoredPositions(ctx, docID, t.KB.Generation)
	if err != nil {
		return err
	}
	for start := done; start < len(chunks); start += s.cfg.EmbedBatch {
		batch := chunks[start:min(start+s.cfg.EmbedBatch, len(chunks))]
		rows, err := s.embedChunks(ctx, t.KB.EmbedModel, DocTitle(t.Doc.Name), batch)
		if err != nil {
			return err
		}
		progress := float32(start+len(batch)) / float32(len(chunks))
		if err := s.store.StoreChunks(ctx, t.Doc, t.KB.Generation, t.KB.Dims, rows, progress); err != nil {
			return err
		}
	}
	return nil
}

// embedChunks embeds a batch of a document's chunks (EmbedText, the
// background limits and retries) and returns them ready to store, with the
// document's title and the identifiers full-text search keeps whole. A
// model that cannot embed is permanent; transient failures that outlived
// their retries are errEmbed, for another attempt.
func (s *Service) embedChunks(ctx context.Context, model, title string, batch []Chunk) ([]db.NewChunk, error) {
	texts := make([]string, len(batch))
	for i, c := range batch {
		texts[i] = EmbedText(title, c.Headings, c.Text)
	}
	vs, err := s.embedBackground(ctx, model, texts)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !transient(err) {
			return nil, permanent{msg: s.describeEmbedError(err, model)}
		}
		return nil, fmt.Errorf("%w: %w", errEmbed, usererr.Wrap(err, s.describeEmbedError(err, model)))
	}
	rows := make([]db.NewChunk, len(batch))
	for i, c := range batch {
		heading := strings.Join(c.Headings, " › ")
		rows[i] = db.NewChunk{Position: c.Position, Text: c.Text, Headings: nonNil(c.Headings), Heading: heading,
			Title: title, Idents: Identifiers(title + " " + heading + " " + c.Text), Page: c.Page, Embedding: vs[i]}
	}
	return rows, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ReembedArgs is the job that moves a knowledge base to another embedding
// model: it embeds every chunk again as the next generation, then swaps.
type ReembedArgs struct {
	KBID int64 `json:"kb_id"`
}

// Kind names the job in River's table.
func (ReembedArgs) Kind() string { return "kb_reembed" }

type reembedWorker struct {
	river.WorkerDefaults[ReembedArgs]
	s *Service
}

func (w *reembedWorker) Work(ctx context.Context, job *river.Job[ReembedArgs]) error {
	s := w.s
	var after int64
	for {
		kb, err := s.store.KBForJob(ctx, job.Args.KBID)
		if errors.Is(err, db.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if kb.PendingModel == "" {
			return nil // abandoned or done
		}
		chunks, err := s.store.ChunksToReembed(ctx, kb, after, s.cfg.EmbedBatch)
		if err != nil {
			return w.giveUp(ctx, job, kb, err)
		}
		if len(chunks) == 0 {
			swapped, err := s.store.SwapGeneration(ctx, kb.ID)
			if err != nil || swapped {
				return w.giveUp(ctx, job, kb, err)
			}
			after = 0 // chunks arrived meanwhile: look again from the start
			continue
		}
		after = chunks[len(chunks)-1].ID
		texts := make([]string, len(chunks))
		for i, c := range chunks {
			texts[i] = EmbedText(c.Title, c.Headings, c.Text)
		}
		vs, err := s.embedBackground(ctx, kb.PendingModel, texts)
		if err == nil {
			for _, v := range vs {
				if len(v) != kb.PendingDims {
					err = permanent{msg: fmt.Sprintf("The model %q changed its dimension (%d, expected %d).", kb.PendingModel, len(v), kb.PendingDims)}
				}
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var p permanent
			if errors.As(err, &p) || !transient(err) || job.Attempt >= job.MaxAttempts {
				msg := s.describeEmbedError(err, kb.PendingModel)
				if errors.As(err, &p) {
					msg = p.msg
				}
				if ferr := s.store.FailReembed(context.WithoutCancel(ctx), kb.ID, msg); ferr != nil {
					return ferr
				}
				return river.JobCancel(err)
			}
			return err
		}
		if err := s.store.StoreReembedded(ctx, kb, chunks, vs); err != nil {
			return w.giveUp(ctx, job, kb, err)
		}
	}
}

// giveUp abandons the move to another model on the job's last attempt, so
// the knowledge base is never left waiting for a job that will not run
// again; earlier attempts just return the error (River retries).
func (w *reembedWorker) giveUp(ctx context.Context, job *river.Job[ReembedArgs], kb db.KnowledgeBase, err error) error {
	if err == nil || job.Attempt < job.MaxAttempts {
		return err
	}
	slog.Error("moving a knowledge base to another model failed", "kb", kb.ID, "err", err)
	if ferr := w.s.store.FailReembed(context.WithoutCancel(ctx), kb.ID, "It kept failing; the server log has the details. Try again."); ferr != nil {
		return ferr
	}
	return err
}
