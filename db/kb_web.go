package db

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Knowledge-base documents fetched from the web (013_kb_web.sql). What a
// user asks for takes the user; what a fetch or crawl job does acts for the
// owner of the row it works on.

// Web states of a document.
const (
	WebFetching = "fetching" // a fetch job is queued or running
	WebUpdating = "updating" // a changed page is read; the version before still answers
)

// WebSource is what a document fetched from the web keeps of its page
// (zero for an uploaded file).
type WebSource struct {
	SourceURL   string     `db:"source_url"`
	FetchedAt   *time.Time `db:"fetched_at"`
	WebState    string     `db:"web_state"`
	WebProgress float32    `db:"web_progress"`
}

const webDocCols = "source_url, fetched_at, web_state, web_progress"

// NewWebPage is a page to add: its URL and the name shown until it is
// fetched.
type NewWebPage struct {
	URL, Name string
}

// AddWebPages adds pages to one of the user's knowledge bases as documents
// waiting for their fetch (enqueue, called for each in the same
// transaction, queues it). A URL the knowledge base already has is left
// out and counted in existing. ErrNotFound: not the user's knowledge base.
func (d *DB) AddWebPages(ctx context.Context, user, kb int64, pages []NewWebPage, enqueue func(tx pgx.Tx, doc Document) error) (added []Document, existing int, err error) {
	err = d.InTx(ctx, func(tx pgx.Tx) error {
		added, existing = nil, 0
		var ok bool
		if err := tx.QueryRow(ctx, "SELECT true FROM knowledge_bases WHERE id = $1 AND owner_id = $2 FOR SHARE", kb, user).Scan(&ok); err != nil {
			return err
		}
		for _, p := range pages {
			// Until it is fetched the document's content key is its URL's:
			// unique, and never a sha256 of content.
			rows, err := tx.Query(ctx, `INSERT INTO kb_documents (kb_id, owner_id, name, sha256, size, source_url, web_state)
				VALUES ($1, $2, $3, 'url:' || encode(sha256(convert_to($4, 'UTF8')), 'hex'), 0, $4, 'fetching')
				ON CONFLICT DO NOTHING RETURNING `+docCols, kb, user, p.Name, p.URL)
			if err != nil {
				return err
			}
			doc, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Document])
			if errors.Is(err, pgx.ErrNoRows) {
				existing++
				continue
			}
			if err != nil {
				return err
			}
			if err := enqueue(tx, doc); err != nil {
				return err
			}
			added = append(added, doc)
		}
		return nil
	})
	return added, existing, mapErr(err)
}

// refetchable is the condition on a web document that may be fetched
// again: settled, and not being read — or never given its bytes (a
// document left without a file cannot be read whatever its status).
const refetchable = `d.source_url <> '' AND d.web_state = '' AND (d.status IN ('ready', 'failed')
	OR NOT EXISTS (SELECT 1 FROM kb_document_files f WHERE f.document_id = d.id))`

// StartRefetch marks one of the user's web documents as being fetched again
// and calls enqueue in the same transaction. A ready document keeps
// answering meanwhile; any other goes back to the queue. ErrNotFound: not
// the user's, not from the web, or being fetched or read already.
func (d *DB) StartRefetch(ctx context.Context, user, doc int64, enqueue func(tx pgx.Tx, doc Document) error) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		docs, err := startRefetch(ctx, tx, "d.id = $1 AND d.owner_id = $2", doc, user)
		if err != nil {
			return err
		}
		if len(docs) == 0 {
			return ErrNotFound
		}
		return enqueue(tx, docs[0])
	}))
}

// StartRefetchAll is StartRefetch for every web document of one of the
// user's knowledge bases that may be fetched again; it returns how many.
func (d *DB) StartRefetchAll(ctx context.Context, user, kb int64, enqueue func(tx pgx.Tx, doc Document) error) (int, error) {
	var n int
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		docs, err := startRefetch(ctx, tx, "d.kb_id = $1 AND d.owner_id = $2", kb, user)
		if err != nil {
			return err
		}
		for _, doc := range docs {
			if err := enqueue(tx, doc); err != nil {
				return err
			}
		}
		n = len(docs)
		return nil
	})
	return n, mapErr(err)
}

func startRefetch(ctx context.Context, tx pgx.Tx, where string, args ...any) ([]Document, error) {
	rows, err := tx.Query(ctx, `UPDATE kb_documents d SET web_state = 'fetching', error = '', updated_at = now(),
			status = CASE WHEN d.status = 'ready' THEN 'ready' ELSE 'queued' END,
			progress = CASE WHEN d.status = 'ready' THEN 1 ELSE 0 END
		WHERE `+where+` AND `+refetchable+` RETURNING `+prefixed("d.", docCols), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Document])
}

// WebPage is what a fetch job needs about its document.
type WebPage struct {
	Doc          Document
	KB           KnowledgeBase
	ETag         string
	LastModified string
	Size         int64 // of the stored version (0: none)
}

// WebPageForJob returns a web document being fetched, with its knowledge
// base (an update an earlier attempt began included). ErrNotFound:
// deleted, or settled already (a job run twice).
func (d *DB) WebPageForJob(ctx context.Context, doc int64) (WebPage, error) {
	var p WebPage
	err := d.ReadSnapshot(ctx, func(s *DB) error {
		rows, err := s.q().Query(ctx, `SELECT `+docCols+`, etag, last_modified,
			COALESCE((SELECT octet_length(data) FROM kb_document_files WHERE document_id = d.id), 0) AS stored
			FROM kb_documents d WHERE id = $1 AND web_state <> ''`, doc)
		if err != nil {
			return err
		}
		type row struct {
			Document
			ETag         string `db:"etag"`
			LastModified string `db:"last_modified"`
			Stored       int64  `db:"stored"`
		}
		r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[row])
		if err != nil {
			return mapErr(err)
		}
		p = WebPage{Doc: r.Document, ETag: r.ETag, LastModified: r.LastModified, Size: r.Stored}
		p.KB, err = oneRow[KnowledgeBase](ctx, s.q(), "SELECT "+kbCols+" FROM knowledge_bases WHERE id = $1", p.Doc.KBID)
		return err
	})
	return p, err
}

// FetchedPage is a page's content as fetched, with its validators.
type FetchedPage struct {
	Name         string
	SHA256       string
	Data         []byte
	ETag         string
	LastModified string
	// MaxUserBytes refuses the page (ErrStorageLimit) when it would take
	// what its owner stores over this many bytes (0: no limit).
	MaxUserBytes int64
}

// DuplicateError is content the knowledge base already has, as the
// document named Name.
type DuplicateError struct{ Name string }

func (e *DuplicateError) Error() string { return "db: duplicate document (as " + e.Name + ")" }
func (e *DuplicateError) Unwrap() error { return ErrDuplicate }

// StoreFetchedPage gives a web document that has no answering version (a
// first fetch, or one that failed) its content, and queues its ingestion
// (enqueue, in the same transaction) as an upload's: the chunks of any
// earlier attempt go.
func (d *DB) StoreFetchedPage(ctx context.Context, doc int64, in FetchedPage, enqueue func(tx pgx.Tx, doc Document) error) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := lockDocKB(ctx, tx, doc, 0, kbShare); err != nil {
			return err
		}
		cur, err := lockWebDoc(ctx, tx, doc, WebFetching)
		if err != nil {
			return err
		}
		if err := checkWebContent(ctx, tx, cur, in); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM kb_chunks WHERE document_id = $1", doc); err != nil {
			return err
		}
		if err := putWebFile(ctx, tx, doc, in.Data); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `UPDATE kb_documents SET name = $2, sha256 = $3, size = $4, etag = $5, last_modified = $6,
				fetched_at = now(), web_state = '', status = 'queued', error = '', progress = 0, chunks = 0,
				chunk_size = 0, chunk_overlap = 0, format = '', updated_at = now()
			WHERE id = $1 RETURNING `+docCols, doc, in.Name, in.SHA256, len(in.Data), in.ETag, in.LastModified)
		if err != nil {
			return err
		}
		next, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Document])
		if err != nil {
			return err
		}
		return enqueue(tx, next)
	}))
}

// lockWebDoc locks a web document in the given web state.
func lockWebDoc(ctx context.Context, tx pgx.Tx, doc int64, state string) (Document, error) {
	return oneRow[Document](ctx, tx, "SELECT "+docCols+" FROM kb_documents WHERE id = $1 AND web_state = $2 FOR UPDATE", doc, state)
}

// checkWebContent refuses content another document of the knowledge base
// has (*DuplicateError), or that would take the owner over their storage
// limit (the version it replaces no longer counts).
func checkWebContent(ctx context.Context, tx pgx.Tx, doc Document, in FetchedPage) error {
	var other string
	err := tx.QueryRow(ctx, "SELECT name FROM kb_documents WHERE kb_id = $1 AND sha256 = $2 AND id <> $3", doc.KBID, in.SHA256, doc.ID).Scan(&other)
	if err == nil {
		return &DuplicateError{Name: other}
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if in.MaxUserBytes <= 0 {
		return nil
	}
	// Under the user's row lock, as uploads check it.
	if _, err := tx.Exec(ctx, "SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE", doc.OwnerID); err != nil {
		return err
	}
	used, err := storedBytes(ctx, tx, doc.OwnerID)
	if err != nil {
		return err
	}
	var old int64
	if err := tx.QueryRow(ctx, "SELECT COALESCE((SELECT octet_length(data) FROM kb_document_files WHERE document_id = $1), 0)", doc.ID).Scan(&old); err != nil {
		return err
	}
	if used-old+int64(len(in.Data)) > in.MaxUserBytes {
		return ErrStorageLimit
	}
	return nil
}

func putWebFile(ctx context.Context, tx pgx.Tx, doc int64, data []byte) error {
	_, err := tx.Exec(ctx, `INSERT INTO kb_document_files (document_id, data) VALUES ($1, $2)
		ON CONFLICT (document_id) DO UPDATE SET data = EXCLUDED.data`, doc, data)
	return err
}

// WebPageUnchanged settles a re-fetch that found the page as it was: the
// validators the server sent now are kept for the next one.
func (d *DB) WebPageUnchanged(ctx context.Context, doc int64, etag, lastModified string) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		// Deleted meanwhile: nothing to settle.
		if _, err := lockDocKB(ctx, tx, doc, 0, kbShare); err != nil {
			return noRowsIsNil(err)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM kb_chunks WHERE document_id = $1 AND generation = $2", doc, stagedGeneration); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE kb_documents SET web_state = '', web_progress = 0, error = '', fetched_at = now(),
			etag = COALESCE(NULLIF($2, ''), etag), last_modified = COALESCE(NULLIF($3, ''), last_modified), updated_at = now()
			WHERE id = $1 AND web_state <> ''`, doc, etag, lastModified)
		return err
	}))
}

// FailWebFetch settles a fetch or update that failed with a message for
// the user: a document with an answering version keeps it (and says why it
// was not updated); any other fails. The next version's chunks go.
func (d *DB) FailWebFetch(ctx context.Context, doc int64, msg string) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		// Deleted meanwhile: nothing to settle.
		if _, err := lockDocKB(ctx, tx, doc, 0, kbShare); err != nil {
			return noRowsIsNil(err)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM kb_chunks WHERE document_id = $1 AND generation = $2", doc, stagedGeneration); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE kb_documents SET web_state = '', web_progress = 0, error = $2, updated_at = now(),
			status = CASE WHEN status = 'ready' THEN 'ready' ELSE 'failed' END WHERE id = $1 AND web_state <> ''`, doc, msg)
		return err
	}))
}
