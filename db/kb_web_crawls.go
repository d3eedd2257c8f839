package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Crawl statuses.
const (
	CrawlRunning = "running"
	CrawlDone    = "done"
	CrawlFailed  = "failed"
)

// WebCrawl is a sitemap being read into a knowledge base, or read.
type WebCrawl struct {
	ID        int64     `db:"id"`
	KBID      int64     `db:"kb_id"`
	OwnerID   int64     `db:"owner_id"`
	URL       string    `db:"url"`
	MaxPages  int       `db:"max_pages"`
	MaxDepth  int       `db:"max_depth"`
	Status    string    `db:"status"`
	Message   string    `db:"message"`
	Pages     int       `db:"pages"`
	CreatedAt time.Time `db:"created_at"`
	UpdatedAt time.Time `db:"updated_at"`
}

const crawlCols = "id, kb_id, owner_id, url, max_pages, max_depth, status, message, pages, created_at, updated_at"

// staleCrawl is how long a crawl may say "running" before it no longer
// holds the knowledge base (its job died for good without settling it).
const staleCrawl = "30 minutes"

// StartWebCrawl records a crawl of one of the user's knowledge bases and
// calls enqueue in the same transaction. ErrConflict: a crawl of this
// knowledge base is still running; ErrNotFound: not the user's.
func (d *DB) StartWebCrawl(ctx context.Context, user, kb int64, url string, maxPages, maxDepth int, enqueue func(tx pgx.Tx, c WebCrawl) error) (WebCrawl, error) {
	var c WebCrawl
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var busy bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kb_web_crawls WHERE kb_id = k.id AND status = 'running'
				AND updated_at > now() - interval '`+staleCrawl+`')
			FROM knowledge_bases k WHERE k.id = $1 AND k.owner_id = $2 FOR SHARE OF k`, kb, user).Scan(&busy)
		if err != nil {
			return err
		}
		if busy {
			return ErrConflict
		}
		if c, err = oneRow[WebCrawl](ctx, tx, `INSERT INTO kb_web_crawls (kb_id, owner_id, url, max_pages, max_depth)
			VALUES ($1, $2, $3, $4, $5) RETURNING `+crawlCols, kb, user, url, maxPages, maxDepth); err != nil {
			return err
		}
		return enqueue(tx, c)
	})
	return c, mapErr(err)
}

// WebCrawls lists the latest crawls of one of the user's knowledge bases,
// newest first.
func (d *DB) WebCrawls(ctx context.Context, user, kb int64, limit int) ([]WebCrawl, error) {
	rows, err := d.q().Query(ctx, "SELECT "+crawlCols+` FROM kb_web_crawls WHERE kb_id = $1 AND owner_id = $2
		ORDER BY id DESC LIMIT $3`, kb, user, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[WebCrawl])
}

// WebCrawlForJob returns a running crawl. ErrNotFound: deleted with its
// knowledge base, or settled.
func (d *DB) WebCrawlForJob(ctx context.Context, id int64) (WebCrawl, error) {
	return oneRow[WebCrawl](ctx, d.q(), "SELECT "+crawlCols+" FROM kb_web_crawls WHERE id = $1 AND status = 'running'", id)
}

// TouchWebCrawl records that a running crawl is alive, with the pages it
// has added so far.
func (d *DB) TouchWebCrawl(ctx context.Context, id int64, pages int) error {
	_, err := d.q().Exec(ctx, "UPDATE kb_web_crawls SET pages = $2, updated_at = now() WHERE id = $1 AND status = 'running'", id, pages)
	return err
}

// FinishWebCrawl settles a crawl with what came of it, for the user.
func (d *DB) FinishWebCrawl(ctx context.Context, id int64, status, message string, pages int) error {
	_, err := d.q().Exec(ctx, `UPDATE kb_web_crawls SET status = $2, message = $3, pages = $4, updated_at = now()
		WHERE id = $1 AND status = 'running'`, id, status, message, pages)
	return err
}

// WebSummary counts one of the user's knowledge base's web documents.
type WebSummary struct {
	Pages int `db:"pages"` // documents from the web
	Busy  int `db:"busy"`  // of them being fetched or updated
}

// WebSummary returns the counts of one of the user's knowledge bases.
func (d *DB) WebSummary(ctx context.Context, user, kb int64) (WebSummary, error) {
	return oneRow[WebSummary](ctx, d.q(), `SELECT count(*) AS pages, count(*) FILTER (WHERE web_state <> '') AS busy
		FROM kb_documents WHERE kb_id = $1 AND owner_id = $2 AND source_url <> ''`, kb, user)
}
