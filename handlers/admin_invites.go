package handlers

import (
	"crypto/rand"
	"log/slog"
	"net/http"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Invite links live from one day to a month (a week by default).
const (
	inviteDefaultDays = 7
	inviteMaxDays     = 30
)

// createInvite makes an invite link (single use, with an expiry, for one
// email address or any) and shows it this once on /admin/users.
func (h *adminUsers) createInvite(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	email := strings.TrimSpace(r.PostForm.Get("email"))
	if email != "" {
		if a, err := mail.ParseAddress(email); err != nil || a.Address != email || len(email) > 254 {
			badRequest(w, r, "Enter a valid email address, or leave it empty for an invite anyone may use.")
			return
		}
	}
	days := inviteDefaultDays
	if s := r.PostForm.Get("days"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > inviteMaxDays {
			badRequest(w, r, "An invite lasts from 1 to 30 days.")
			return
		}
		days = n
	}
	me, _ := currentUser(r)
	token := rand.Text() // 130 bits
	inv, err := h.store.CreateInvite(r.Context(), me.ID, token, email, time.Now().Add(time.Duration(days)*24*time.Hour))
	if err != nil {
		serverError(w, r, err)
		return
	}
	slog.InfoContext(r.Context(), "invite made", "invite", inv.ID, "by", me.ID, "days", days)
	h.renderList(w, r, http.StatusOK, absoluteURL(r, h.publicURL, "/invite/"+token), "")
}

func (h *adminUsers) revokeInvite(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	if err := h.store.RevokeInvite(r.Context(), id); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, "/admin/users?done=revoked#invites")
}

// absoluteURL is path on the address users reach Weft at: WEFT_PUBLIC_URL
// when set, else the scheme and Host of this request (which checkHost
// accepted).
func absoluteURL(r *http.Request, public *url.URL, path string) string {
	if public != nil {
		return strings.TrimSuffix(public.String(), "/") + path
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + path
}
