package handlers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"weft/db"
	"weft/internal/usererr"
	"weft/views"
)

// Share links, the owner's side: make one of a thread, list them, revoke.
// The reader's side is shared.go.

type shareStore interface {
	Thread(ctx context.Context, user, id int64) (db.Thread, error)
	CreateShare(ctx context.Context, user, thread int64, in db.NewShare) (db.Share, error)
	ThreadShares(ctx context.Context, user, thread int64) ([]db.Share, error)
	UserShares(ctx context.Context, user int64) ([]db.Share, error)
	RevokeShare(ctx context.Context, user, id int64) (db.Share, error)
}

// sharePages serves POST /t/{id}/shares, POST /shares/{id}/revoke and
// /shares.
type sharePages struct {
	store     shareStore
	shell     *shell
	publicURL *url.URL
	now       func() time.Time
}

// shareExpiry is how long a new link opens, by the form's value (0: for
// ever).
var shareExpiry = map[string]time.Duration{"never": 0, "": 0, "1d": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour}

// shareTokenLen is the length of a token: 32 random bytes, base64url
// without padding (256 bits, URL-safe).
const shareTokenLen = 43

// shareHintLen is how many of a token's characters are kept to tell links
// apart (shares.token_hint, and what logs keep of a share's path).
const shareHintLen = 6

// newShareToken makes a link's token and the hash stored for it.
func newShareToken() (token string, sum []byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	token = base64.RawURLEncoding.EncodeToString(b)
	return token, shareTokenHash(token)
}

func shareTokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// validShareToken reports whether s has a token's shape (checked before any
// database work, and before a token is put into a URL).
func validShareToken(s string) bool {
	if len(s) != shareTokenLen {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// shareURL is the address a link is reached at: under WEFT_PUBLIC_URL when
// set, else the Host this request came to (checkHost allowed it).
func (h *sharePages) shareURL(r *http.Request, token string) string {
	if h.publicURL != nil {
		return strings.TrimRight(h.publicURL.String(), "/") + "/s/" + token
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/s/" + token
}

// create serves POST /t/{id}/shares: a new link to the thread's visible
// path as it is now; its URL is shown in the answer, and never again.
func (h *sharePages) create(w http.ResponseWriter, r *http.Request) {
	u, t, ok := pathThread(w, r, h.store)
	if !ok || !parseForm(w, r) {
		return
	}
	ttl, ok := shareExpiry[r.PostForm.Get("expires")]
	if !ok {
		badRequest(w, r, "Choose when the link expires: never, or in 1, 7 or 30 days.")
		return
	}
	token, sum := newShareToken()
	in := db.NewShare{TokenSHA256: sum, TokenHint: token[:shareHintLen], IncludeFiles: r.PostForm.Get("files") == "on"}
	if ttl > 0 {
		at := h.now().Add(ttl)
		in.ExpiresAt = &at
	}
	p := views.SharePanel{ThreadID: t.ID}
	s, err := h.store.CreateShare(r.Context(), u.ID, t.ID, in)
	status := http.StatusOK
	switch {
	case errors.Is(err, db.ErrNothingToShare), errors.Is(err, db.ErrSharesFull):
		p.Error, status = usererr.Capitalize(usererr.Or(err, ""))+".", http.StatusUnprocessableEntity
	case err != nil:
		storeError(w, r, err)
		return
	default:
		p.NewURL, p.NewID = h.shareURL(r, token), s.ID
	}
	h.renderPanel(w, r, status, u.ID, t, p)
}

// renderPanel answers with the thread's share panel: the fragment for
// htmx, else a page of its own.
func (h *sharePages) renderPanel(w http.ResponseWriter, r *http.Request, status int, user int64, t db.Thread, p views.SharePanel) {
	var err error
	if p.Shares, err = h.store.ThreadShares(r.Context(), user, t.ID); err != nil {
		serverError(w, r, err)
		return
	}
	p.Now = h.now()
	// The URL of a new link is a secret: no cache keeps the answer.
	w.Header().Set("Cache-Control", "no-store")
	if isHTMX(r) {
		render(w, r, status, views.ShareControl(p))
		return
	}
	h.shell.page(w, r, status, "Share", views.ShareCreatedPage(t.Title, p))
}

// revoke serves POST /shares/{id}/revoke: the link stops opening at once.
func (h *sharePages) revoke(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	s, err := h.store.RevokeShare(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	switch {
	case isHTMX(r):
		t, err := h.store.Thread(r.Context(), u.ID, s.ThreadID)
		if err != nil {
			storeError(w, r, err)
			return
		}
		h.renderPanel(w, r, http.StatusOK, u.ID, t, views.SharePanel{ThreadID: t.ID})
	case r.PostForm.Get("from") == "shares":
		redirect(w, r, "/shares")
	default:
		redirect(w, r, threadURL(s.ThreadID))
	}
}

// list serves GET /shares: every link of the user.
func (h *sharePages) list(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	list, err := h.store.UserShares(r.Context(), u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.shell.page(w, r, http.StatusOK, "Shared links", views.SharesPage(list, h.now()))
}

// shareLister lists a thread's share links.
type shareLister interface {
	ThreadShares(ctx context.Context, user, thread int64) ([]db.Share, error)
}

// threadSharePanel is the share panel of the thread page (otherBranch: the
// page shows a branch other than the saved one, which a link shares).
func threadSharePanel(ctx context.Context, s shareLister, user int64, t db.Thread, otherBranch bool) (views.SharePanel, error) {
	list, err := s.ThreadShares(ctx, user, t.ID)
	return views.SharePanel{ThreadID: t.ID, Shares: list, Now: time.Now(), OtherBranch: otherBranch}, err
}

func threadURL(id int64) string { return "/t/" + strconv.FormatInt(id, 10) }
