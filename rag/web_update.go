package rag

import (
	"context"
	"errors"
	"strings"

	"weft/db"
	"weft/extract"
	"weft/internal/usererr"
)

// updatePage reads a changed page as ingestion reads an upload — in the
// jail, cut by the knowledge base's current chunking, embedded in bounded
// batches — but builds its chunks beside the version that answers, then
// swaps them in at once (db.SwapWebVersion): the document never has no
// chunks. An attempt that stops half-way starts the update again.
func (s *Service) updatePage(ctx context.Context, p db.WebPage, in db.FetchedPage, format string) error {
	if err := s.store.BeginWebUpdate(ctx, p.Doc.ID); err != nil {
		return err
	}
	kb := p.KB
	blocks, err := extract.Read(ctx, format, in.Data, extract.Limits{})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var re *extract.ReadError
		if errors.As(err, &re) || errors.Is(err, extract.ErrUnsupported) {
			return permanent{msg: "its new version could not be read: " + usererr.Or(err, extract.ErrUnsupported.Error())}
		}
		return err // the jail itself failed: another attempt may do
	}
	overlap := kb.ChunkOverlap
	if overlap == 0 {
		overlap = -1 // Split: negative is "none", 0 the default
	}
	chunks := Split(blocks, ChunkOptions{Size: kb.ChunkSize, Overlap: overlap})
	if len(chunks) == 0 {
		return permanent{msg: "no text was found in its new version"}
	}
	for start := 0; start < len(chunks); start += s.cfg.EmbedBatch {
		batch := chunks[start:min(start+s.cfg.EmbedBatch, len(chunks))]
		rows, err := s.embedChunks(ctx, kb.EmbedModel, DocTitle(orName(in.Name, p.Doc.Name)), batch) // the new version's title
		if pe := (permanent{}); errors.As(err, &pe) {
			return permanent{msg: strings.TrimSuffix(pe.msg, ".")} // a part of "Not updated: …"
		}
		if err != nil {
			return err
		}
		progress := float32(start+len(batch)) / float32(len(chunks))
		if err := s.store.StoreStagedChunks(ctx, p.Doc, kb.Dims, rows, progress); err != nil {
			return err
		}
	}
	return s.store.SwapWebVersion(ctx, p.Doc.ID, db.WebVersion{FetchedPage: in, Format: format,
		Generation: kb.Generation, ChunkSize: kb.ChunkSize, ChunkOverlap: kb.ChunkOverlap})
}

func orName(name, def string) string {
	if name == "" {
		return def
	}
	return name
}
