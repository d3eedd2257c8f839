package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"weft/db"
	"weft/media"
	"weft/views"
)

type mediaStore interface {
	AttachmentByID(ctx context.Context, user, id int64) (db.Attachment, error)
	MediaByID(ctx context.Context, user, id int64) (db.Media, error)
	Message(ctx context.Context, user, id int64) (db.Message, error)
	SetThreadMedia(ctx context.Context, user, thread int64, tts, image bool) error
	Thread(ctx context.Context, user, id int64) (db.Thread, error)
}

type mediaService interface {
	ReadAloud(ctx context.Context, user, msg int64) (db.Media, error)
	MaxPending() int
	Settings(ctx context.Context) (media.Settings, error)
	SaveSettings(ctx context.Context, st media.Settings) error
	ImagesEnabled(ctx context.Context) bool
	LastReport(ctx context.Context) media.Report
	Stale(m db.Media) bool
}

// mediaPages serves attachments and generated media, read-aloud, the
// thread's media options and the admin's media settings.
type mediaPages struct {
	store mediaStore
	ms    mediaService
	blobs media.BlobStore
	shell *shell
}

// inlineTypes are the only types shown in the browser; everything else is
// a download, served as opaque bytes.
var inlineTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true,
	"audio/wav": true, "audio/mpeg": true, "audio/ogg": true, "audio/flac": true, "audio/webm": true, "audio/mp4": true}

// serveBlob sends a stored file. Raster images and audio are inline, with
// their sniffed type; anything else is an attachment of type
// application/octet-stream, so no HTML or SVG is ever rendered.
func (h *mediaPages) serveBlob(w http.ResponseWriter, r *http.Request, sha, mimeType, name string) {
	f, err := h.blobs.Open(sha)
	if errors.Is(err, fs.ErrNotExist) {
		// Its file is gone (removed by hand, or lost): nothing to send.
		slog.WarnContext(r.Context(), "stored file missing", "sha", sha)
		notFound(w, r)
		return
	}
	if err != nil {
		serverError(w, r, fmt.Errorf("open blob: %w", err))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		serverError(w, r, err)
		return
	}
	hd := w.Header()
	disposition := "attachment"
	if inlineTypes[mimeType] {
		disposition = "inline"
		hd.Set("Content-Type", mimeType)
	} else {
		hd.Set("Content-Type", "application/octet-stream")
	}
	hd.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": name}))
	hd.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	if hd.Get("Cache-Control") == "" { // a share link's files are never cached
		hd.Set("Cache-Control", "private, max-age=86400")
	}
	http.ServeContent(w, r, "", st.ModTime(), f)
}

// attachment serves GET /attachments/{id}.
func (h *mediaPages) attachment(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	a, err := h.store.AttachmentByID(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	h.serveBlob(w, r, a.SHA256, a.MIME, a.Name)
}

// attachmentThumb serves GET /attachments/{id}/thumb.
func (h *mediaPages) attachmentThumb(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	a, err := h.store.AttachmentByID(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	if a.ThumbSHA == "" {
		notFound(w, r)
		return
	}
	h.serveBlob(w, r, a.ThumbSHA, "image/png", "thumbnail.png")
}

// mediaFile serves GET /media/{id}, and GET /media/{id}/thumb.
func (h *mediaPages) mediaFile(thumb bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, _ := currentUser(r)
		id, ok := pathID(w, r, "id")
		if !ok {
			return
		}
		m, err := h.store.MediaByID(r.Context(), u.ID, id)
		if err != nil {
			storeError(w, r, err)
			return
		}
		switch {
		case m.Status != db.MediaReady:
			notFound(w, r)
		case thumb && m.ThumbSHA == "":
			notFound(w, r)
		case thumb:
			h.serveBlob(w, r, m.ThumbSHA, "image/png", "thumbnail.png")
		default:
			h.serveBlob(w, r, m.SHA256, m.MIME, mediaName(m))
		}
	}
}

func mediaName(m db.Media) string {
	ext := ".bin"
	if exts, _ := mime.ExtensionsByType(m.MIME); len(exts) > 0 {
		ext = exts[len(exts)-1]
	}
	switch m.MIME {
	case "audio/wav":
		ext = ".wav"
	case "audio/mpeg":
		ext = ".mp3"
	case "image/png":
		ext = ".png"
	case "image/jpeg":
		ext = ".jpg"
	}
	return fmt.Sprintf("weft-%s-%d%s", m.Kind, m.ID, ext)
}

// mediaCard serves GET /media/{id}/card: the media's current state (a
// pending one polls this until it is ready or failed).
func (h *mediaPages) mediaCard(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	m, err := h.store.MediaByID(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	if h.ms.Stale(m) {
		// Its job was lost; the next collection records the failure. Until
		// then it is shown as failed, so that the page stops polling.
		m.Status, m.Error = db.MediaFailed, media.StaleFailure
	}
	render(w, r, http.StatusOK, views.MediaCard(m, true))
}

// mediaLimitMessage says why a read-aloud or image request was refused.
func mediaLimitMessage(max int) string {
	return fmt.Sprintf("You already have %d read-aloud or image requests being prepared, the most at once. Wait for one to finish, then try again.", max)
}

// speak serves POST /m/{id}/speak: read an answer aloud.
func (h *mediaPages) speak(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	m, err := h.store.Message(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	if m.Role != "assistant" || m.Status != db.MsgComplete || strings.TrimSpace(m.Content) == "" {
		badRequest(w, r, "Only a finished answer with text can be read aloud.")
		return
	}
	md, err := h.ms.ReadAloud(r.Context(), u.ID, id)
	if errors.Is(err, db.ErrMediaLimit) {
		msg := mediaLimitMessage(h.ms.MaxPending())
		if isHTMX(r) {
			render(w, r, http.StatusUnprocessableEntity, views.MediaNotice(msg))
			return
		}
		badRequest(w, r, msg)
		return
	}
	if err != nil {
		storeError(w, r, err)
		return
	}
	if isHTMX(r) {
		render(w, r, http.StatusOK, views.MediaCard(md, true))
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d#m%d", m.ThreadID, m.ID))
}

// threadMedia serves POST /t/{id}/media: automatic read-aloud and images.
func (h *mediaPages) threadMedia(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	image := r.PostForm.Get("image") == "on"
	if image && !h.ms.ImagesEnabled(r.Context()) {
		badRequest(w, r, "Image generation is not configured on this server.")
		return
	}
	if err := h.store.SetThreadMedia(r.Context(), u.ID, id, r.PostForm.Get("tts") == "on", image); err != nil {
		storeError(w, r, err)
		return
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, "Saved the thread's media options.")
	redirect(w, r, fmt.Sprintf("/t/%d", id))
}

// adminMedia serves POST /admin/media: the read-aloud engine and the image
// endpoint. An empty key field keeps the stored key, unless the endpoint's
// address changed (see media.Settings.WithKeys).
func (h *mediaPages) adminMedia(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	old, err := h.ms.Settings(r.Context())
	if err != nil {
		serverError(w, r, err)
		return
	}
	f := r.PostForm
	st := media.Settings{TTSEngine: f.Get("tts_engine"), TTSURL: strings.TrimSpace(f.Get("tts_url")),
		TTSModel: strings.TrimSpace(f.Get("tts_model")), TTSVoice: strings.TrimSpace(f.Get("tts_voice")),
		ImageURL: strings.TrimSpace(f.Get("image_url")), ImageModel: strings.TrimSpace(f.Get("image_model")),
		ImageSize: strings.TrimSpace(f.Get("image_size"))}
	st = st.WithKeys(old, f.Get("tts_key"), f.Get("image_key"))
	if f.Get("clear_keys") == "on" {
		st.TTSKey, st.ImageKey = "", ""
	}
	switch {
	case st.TTSEngine != "espeak" && st.TTSEngine != "openai":
		badRequest(w, r, "The read-aloud engine is espeak-ng or an OpenAI-compatible endpoint.")
		return
	case st.TTSEngine == "openai" && !httpURL(st.TTSURL):
		badRequest(w, r, "The speech endpoint needs an http:// or https:// address.")
		return
	case st.ImageURL != "" && !httpURL(st.ImageURL):
		badRequest(w, r, "The image endpoint needs an http:// or https:// address.")
		return
	}
	if err := h.ms.SaveSettings(r.Context(), st); err != nil {
		serverError(w, r, err)
		return
	}
	redirect(w, r, "/admin?saved")
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// readUploads reads the composer's files field, each capped at max+1 bytes
// (the limits then name what is too large).
func readUploads(r *http.Request, max int64) ([]media.Upload, error) {
	if r.MultipartForm == nil {
		return nil, nil
	}
	var out []media.Upload
	for _, fh := range r.MultipartForm.File["files"] {
		if fh.Filename == "" && fh.Size == 0 {
			continue // an empty file input
		}
		f, err := fh.Open()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(io.LimitReader(f, max+1))
		f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, media.Upload{Name: fh.Filename, Data: data, Size: fh.Size})
	}
	return out, nil
}
