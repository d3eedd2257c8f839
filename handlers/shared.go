package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"weft/chat"
	"weft/db"
	"weft/views"
)

// Share links, the reader's side: GET /s/{token} and the link's own file
// URLs. No session is needed or read: the token is the only credential,
// looked up in the database on every request (so a revoked or expired link
// is a 404 at once), and everything else is read as the link's owner, only
// on the shared path.

type sharedStore interface {
	ShareByToken(ctx context.Context, tokenSHA256 []byte, now time.Time) (db.Share, error)
	SharedPath(ctx context.Context, s db.Share, before int64, limit int) ([]db.Message, bool, error)
	SharedAttachment(ctx context.Context, s db.Share, id int64) (db.Attachment, error)
	SharedMedia(ctx context.Context, s db.Share, id int64) (db.Media, error)
	Attachments(ctx context.Context, user int64, msgs []int64) (map[int64][]db.Attachment, error)
	MediaOf(ctx context.Context, user int64, msgs []int64) (map[int64][]db.Media, error)
	bodyStore
}

// sharedPages serves what a share link opens.
type sharedPages struct {
	store sharedStore
	files *mediaPages // serveBlob
	now   func() time.Time
}

// shareHeaders are the headers of every answer under /s/: not indexed, no
// Referer carrying the token away, never cached (a revoke takes effect at
// once, in browsers and proxies alike).
func shareHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Robots-Tag", "noindex, nofollow")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// share is the live link named by the path's {token}; it answers the
// request itself (404) when there is none.
func (h *sharedPages) share(w http.ResponseWriter, r *http.Request) (db.Share, string, bool) {
	token := chi.URLParam(r, "token")
	if !validShareToken(token) {
		notFound(w, r)
		return db.Share{}, "", false
	}
	s, err := h.store.ShareByToken(r.Context(), shareTokenHash(token), h.now())
	if err != nil {
		storeError(w, r, err)
		return db.Share{}, "", false
	}
	return s, token, true
}

// show serves GET /s/{token} (?before=message: the page above it).
func (h *sharedPages) show(w http.ResponseWriter, r *http.Request) {
	s, token, ok := h.share(w, r)
	if !ok {
		return
	}
	var before int64
	if b := r.URL.Query().Get("before"); b != "" {
		var err error
		if before, err = strconv.ParseInt(b, 10, 64); err != nil || before <= 0 {
			notFound(w, r)
			return
		}
	}
	msgs, more, err := h.store.SharedPath(r.Context(), s, before, chat.PathPageSize)
	if err != nil {
		serverError(w, r, err)
		return
	}
	if before > 0 && len(msgs) == 0 {
		notFound(w, r) // not a message of the path (or nothing above it)
		return
	}
	v := views.SharedView{Token: token, Title: s.ThreadTitle, ExpiresAt: s.ExpiresAt, Files: s.IncludeFiles, More: more}
	if v.Messages, err = h.messages(r.Context(), s, msgs); err != nil {
		serverError(w, r, err)
		return
	}
	render(w, r, http.StatusOK, views.SharedDocument(v))
}

// messages pairs the path's messages with their stored renderings and,
// when the link includes them, their files.
func (h *sharedPages) messages(ctx context.Context, s db.Share, msgs []db.Message) ([]views.SharedMessage, error) {
	vs := make([]views.MessageView, len(msgs))
	ids := make([]int64, len(msgs))
	for i, m := range msgs {
		vs[i] = views.MessageView{MessageItem: chat.MessageItem{Message: m}}
		ids[i] = m.ID
	}
	fillBodies(ctx, h.store, s.OwnerID, vs)
	files, media := map[int64][]db.Attachment{}, map[int64][]db.Media{}
	if s.IncludeFiles {
		var err error
		if files, err = h.store.Attachments(ctx, s.OwnerID, ids); err != nil {
			return nil, err
		}
		if media, err = h.store.MediaOf(ctx, s.OwnerID, ids); err != nil {
			return nil, err
		}
	}
	out := make([]views.SharedMessage, len(msgs))
	for i, v := range vs {
		body := v.Body
		if body == "" && v.Message.Role == db.RoleAssistant {
			body = views.MessageBodyHTML(v.Message)
		}
		out[i] = views.SharedMessage{Message: v.Message, Body: views.SharedBodyHTML(body),
			Attachments: files[v.Message.ID], Media: media[v.Message.ID]}
	}
	return out, nil
}

// attachment serves GET /s/{token}/attachments/{id} and its /thumb: a file
// of a message on the shared path, when the link includes files.
func (h *sharedPages) attachment(thumb bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, _, ok := h.share(w, r)
		if !ok {
			return
		}
		id, ok := pathID(w, r, "id")
		if !ok {
			return
		}
		a, err := h.store.SharedAttachment(r.Context(), s, id)
		switch {
		case err != nil:
			storeError(w, r, err)
		case !thumb:
			h.files.serveBlob(w, r, a.SHA256, a.MIME, a.Name)
		case a.ThumbSHA == "":
			notFound(w, r)
		default:
			h.files.serveBlob(w, r, a.ThumbSHA, "image/png", "thumbnail.png")
		}
	}
}

// media serves GET /s/{token}/media/{id} and its /thumb: ready generated
// media of a message on the shared path, when the link includes files.
func (h *sharedPages) media(thumb bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, _, ok := h.share(w, r)
		if !ok {
			return
		}
		id, ok := pathID(w, r, "id")
		if !ok {
			return
		}
		m, err := h.store.SharedMedia(r.Context(), s, id)
		switch {
		case err != nil:
			storeError(w, r, err)
		case !thumb:
			h.files.serveBlob(w, r, m.SHA256, m.MIME, mediaName(m))
		case m.ThumbSHA == "":
			notFound(w, r)
		default:
			h.files.serveBlob(w, r, m.ThumbSHA, "image/png", "thumbnail.png")
		}
	}
}
