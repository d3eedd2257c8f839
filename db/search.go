package db

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// SearchHit is one thread or message matching a search.
type SearchHit struct {
	ThreadID    int64  `db:"thread_id"`
	ThreadTitle string `db:"title"`
	MessageID   *int64 `db:"message_id"` // nil: the title matched
	Role        string `db:"role"`
	Text        string `db:"text"` // the text that matched (for the snippet)
	Rank        float32
}

// Search finds the user's threads in a workspace whose title or message
// text (of finished messages) matches q: full-text (any word of q, 'simple' configuration, so no
// language is favoured) or, for scripts without spaces and for partial
// words, substring (trigram indexes). Best matches first, at most limit.
func (d *DB) Search(ctx context.Context, user, workspace int64, q string, limit int) ([]SearchHit, error) {
	q = strings.TrimSpace(q)
	if q == "" {
		return nil, nil
	}
	like := "%" + escapeLike(q) + "%"
	// The simple protocol plans the query for these very values: a plan
	// cached for any pattern cannot know whether the trigram index pays.
	rows, err := d.q().Query(ctx, `WITH q AS (SELECT websearch_to_tsquery('simple', $3) AS tsq)
		(SELECT t.id AS thread_id, t.title, NULL::bigint AS message_id, '' AS role, t.title AS text, 2::real AS rank
		 FROM threads t WHERE t.workspace_id = $2 AND t.owner_id = $1 AND NOT t.is_room AND t.title ILIKE $4
		 ORDER BY t.last_activity_at DESC LIMIT $5)
		UNION ALL
		(SELECT t.id, t.title, m.id, m.role, left(m.content, 20000),
			(ts_rank(m.search, q.tsq) + CASE WHEN m.content ILIKE $4 THEN 1 ELSE 0 END)::real
		 FROM messages m JOIN threads t ON t.id = m.thread_id, q
		 WHERE t.workspace_id = $2 AND t.owner_id = $1 AND NOT t.is_room AND m.role IN ('user', 'assistant') AND m.status <> 'streaming'
		   AND (m.search @@ q.tsq OR m.content ILIKE $4)
		 ORDER BY 6 DESC, m.id DESC LIMIT $5)
		ORDER BY rank DESC LIMIT $5`, pgx.QueryExecModeSimpleProtocol, user, workspace, q, like, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (SearchHit, error) {
		var h SearchHit
		err := row.Scan(&h.ThreadID, &h.ThreadTitle, &h.MessageID, &h.Role, &h.Text, &h.Rank)
		return h, err
	})
}

// escapeLike makes user text literal inside a LIKE pattern.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
