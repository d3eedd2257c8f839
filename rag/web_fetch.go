package rag

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"weft/db"
	"weft/internal/usererr"
	"weft/internal/webfetch"
)

type webFetchWorker struct {
	river.WorkerDefaults[WebFetchArgs]
	s *Service
}

// Work fetches one web document. A page fetched for the first time (or
// after a failure) is stored and queued for ingestion like an upload; a
// re-fetch of a page that answers asks the server whether it changed and
// reads it again only when its content did.
func (w *webFetchWorker) Work(ctx context.Context, job *river.Job[WebFetchArgs]) error {
	s := w.s
	p, err := s.store.WebPageForJob(ctx, job.Args.DocumentID)
	if errors.Is(err, db.ErrNotFound) {
		return nil // deleted meanwhile, or settled already (a job run twice)
	}
	if err != nil {
		return err
	}
	if s.cfg.WebOff {
		err = permanent{msg: webOffReason}
	} else {
		err = s.fetchPage(ctx, p, job.Args.MaxUserBytes)
	}
	var perm permanent
	switch {
	case err == nil, errors.Is(err, db.ErrNotFound):
		return nil
	case errors.As(err, &perm):
		if ferr := s.store.FailWebFetch(context.WithoutCancel(ctx), p.Doc.ID, webFailure(p, perm.msg)); ferr != nil {
			return ferr
		}
		return river.JobCancel(err)
	case ctx.Err() != nil:
		return err
	case job.Attempt >= job.MaxAttempts:
		slog.Error("fetching a web document failed for good", "document", p.Doc.ID, "err", err)
		msg := "reading it kept failing; the server log has the details"
		if m, ok := usererr.Message(err); ok && errors.Is(err, errEmbed) {
			msg = strings.TrimSuffix(m, ".")
		}
		_ = s.store.FailWebFetch(context.WithoutCancel(ctx), p.Doc.ID, webFailure(p, msg))
		return err
	default:
		slog.Warn("fetching a web document failed; it will be tried again", "document", p.Doc.ID, "attempt", job.Attempt, "err", err)
		return err
	}
}

// webOffReason settles a fetch queued before the web was turned off.
const webOffReason = "fetching pages from the web is turned off on this server"

// answering reports whether a web document has a version that answers.
func answering(p db.WebPage) bool { return p.Doc.Status == db.DocReady && p.Size > 0 }

// webFailure is what a document says when its fetch failed for reason: a
// page that answers keeps its version, and says so.
func webFailure(p db.WebPage, reason string) string {
	reason = strings.TrimSuffix(reason, ".")
	if !answering(p) {
		return usererr.Capitalize(reason) + "."
	}
	when := "before"
	if p.Doc.FetchedAt != nil {
		when = "on " + webTime(*p.Doc.FetchedAt)
	}
	return "Not updated: " + reason + ". The version fetched " + when + " still answers."
}

// fetchPage does one attempt. Failures of the page itself (the fetch, its
// type, its size, its content) are permanent with their reason.
func (s *Service) fetchPage(ctx context.Context, p db.WebPage, maxUserBytes int64) error {
	req := webfetch.Request{URL: p.Doc.SourceURL, Accept: webAccept, Whole: true}
	if answering(p) {
		req.IfNoneMatch, req.IfModifiedSince = p.ETag, p.LastModified
	}
	resp, err := s.webClient(s.cfg.MaxFileBytes).Get(ctx, req)
	if err != nil {
		if msg, ok := usererr.Message(err); ok {
			return permanent{msg: msg}
		}
		return err
	}
	if resp.NotModified {
		return s.store.WebPageUnchanged(ctx, p.Doc.ID, resp.ETag, resp.LastModified)
	}
	name, data, format, err := pageContent(resp)
	if err != nil {
		return permanent{msg: usererr.Or(err, "the page could not be read")}
	}
	sum := sha256.Sum256(data)
	in := db.FetchedPage{Name: name, SHA256: hex.EncodeToString(sum[:]), Data: data, ETag: resp.ETag,
		LastModified: resp.LastModified, MaxUserBytes: maxUserBytes}
	if answering(p) {
		if in.SHA256 == p.Doc.SHA256 {
			return s.store.WebPageUnchanged(ctx, p.Doc.ID, resp.ETag, resp.LastModified)
		}
		return refusedContent(s.updatePage(ctx, p, in, format), maxUserBytes)
	}
	return refusedContent(s.store.StoreFetchedPage(ctx, p.Doc.ID, in, s.EnqueueIngest(ctx)), maxUserBytes)
}

// refusedContent makes the store's refusals of a page's content permanent
// failures with their reason.
func refusedContent(err error, maxUserBytes int64) error {
	var dup *db.DuplicateError
	switch {
	case errors.As(err, &dup):
		return permanent{msg: "the same content is already in this knowledge base (as " + dup.Name + ")"}
	case errors.Is(err, db.ErrStorageLimit):
		return permanent{msg: strings.TrimSuffix(db.StorageLimitMessage(maxUserBytes), ".")}
	}
	return err
}

// webTime is how a fetch time is shown.
func webTime(t time.Time) string { return t.UTC().Format("2 Jan 2006 15:04 UTC") }
