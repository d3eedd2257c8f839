package handlers

import (
	"context"
	"log/slog"
	"time"

	"weft/db"
	"weft/views"
)

// bodyStore keeps the rendered HTML of final answers, so that markdown is
// rendered once per answer (and renderer version), not on every page view.
type bodyStore interface {
	RenderedBodies(ctx context.Context, user int64, ids []int64, version int) (map[int64]string, error)
	StoreRenderedBody(ctx context.Context, user, id int64, updatedAt time.Time, version int, html string) error
}

// fillBodies gives each final answer among vs its stored rendering, and
// renders and stores those that have none of this renderer version (an
// answer from before the version, an import, an interrupted run). A store
// that fails only costs a render.
func fillBodies(ctx context.Context, s bodyStore, user int64, vs []views.MessageView) {
	var ids []int64
	for _, v := range vs {
		if v.Run == nil && views.HasStoredBody(v.Message) {
			ids = append(ids, v.Message.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	stored, err := s.RenderedBodies(ctx, user, ids, views.RendererVersion)
	if err != nil {
		slog.Warn("read rendered answers", "user", user, "err", err)
		stored = map[int64]string{}
	}
	for i, v := range vs {
		if v.Run != nil || !views.HasStoredBody(v.Message) {
			continue
		}
		if html, ok := stored[v.Message.ID]; ok {
			vs[i].Body = html
			continue
		}
		vs[i].Body = renderAndStore(ctx, s, user, v.Message)
	}
}

// chromaTimeout is the match timeout chroma gives every regexp of its
// lexers (regexp.go in chroma v2): a match cut by it silently changes the
// highlighting. On a loaded machine a render can hit it, so a rendering
// with code that took that long is shown but not kept.
const chromaTimeout = 250 * time.Millisecond

// renderAndStore renders a final answer and keeps the result, unless it
// holds code and took long enough that chroma may have cut a match.
func renderAndStore(ctx context.Context, s bodyStore, user int64, m db.Message) string {
	start := time.Now()
	html := views.MessageBodyHTML(m)
	if html == "" {
		return "" // nothing worth a write
	}
	if time.Since(start) >= chromaTimeout*4/5 && views.HasCode(m.Content) {
		slog.Info("a slow rendering with code is not kept", "message", m.ID, "took", time.Since(start))
		return html
	}
	if err := s.StoreRenderedBody(ctx, user, m.ID, m.UpdatedAt, views.RendererVersion, html); err != nil {
		slog.Warn("store rendered answer", "message", m.ID, "err", err)
	}
	return html
}

// StoreRenderings is chat.Config.Finalized: it renders an answer as it
// becomes final and keeps the HTML, before the answer's watchers are told
// (so the stream's final event and later page views use the stored HTML).
func StoreRenderings(store *db.DB) func(ctx context.Context, user int64, m db.Message) {
	return func(ctx context.Context, user int64, m db.Message) {
		if views.HasStoredBody(m) {
			renderAndStore(ctx, store, user, m)
		}
	}
}
