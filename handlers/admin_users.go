package handlers

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"weft/db"
	"weft/views"
)

type usersStore interface {
	ListUsers(ctx context.Context, f db.UserFilter) ([]db.UserRow, int, error)
	AdminUser(ctx context.Context, id int64) (db.UserRow, error)
	Holdings(ctx context.Context, user int64) (db.UserHoldings, error)
	SetUserDisabled(ctx context.Context, actor, target int64, disabled bool) ([]string, error)
	SetUserRole(ctx context.Context, actor, target int64, role string) error
	DeleteUser(ctx context.Context, actor, target int64, confirm string) (db.DeletedUser, error)
	CreatePasswordReset(ctx context.Context, actor, target int64, token string, expires time.Time) error
	Invites(ctx context.Context, limit int) ([]db.Invite, error)
	CreateInvite(ctx context.Context, actor int64, token, email string, expires time.Time) (db.Invite, error)
	RevokeInvite(ctx context.Context, id int64) error
	EnabledAdmins(ctx context.Context) (int, error)
	SignupMode(ctx context.Context) (string, error)
}

// userRunStopper stops every run of an account (chat.Runtime).
type userRunStopper interface {
	StopUserRuns(ctx context.Context, user int64) error
}

// blobReleaser collects files nothing references any more (media.Service).
type blobReleaser interface {
	Release(ctx context.Context, shas []string)
}

// adminUsers serves /admin/users: the accounts of the instance and what an
// administrator does with them, and the invite links of invite-only
// sign-up.
type adminUsers struct {
	store   usersStore
	runs    userRunStopper
	blobs   blobReleaser
	streams *streamRegistry
	shell   *shell
	// workspaceRoot is a workspace's folder on disk (agent.Root).
	workspaceRoot func(db.Workspace) string
	publicURL     *url.URL
}

const (
	usersPageSize = 50
	usersMaxPage  = math.MaxInt32
	resetLinkTTL  = 24 * time.Hour
	msgLastAdmin  = "That would leave this server without an enabled administrator. Make another account an administrator first."
	msgNotAdmin   = "Your account is no longer an administrator."
)

// done notices after an action (a fixed set: nothing from the request is
// echoed).
var usersNotices = map[string]string{
	"disabled": "The account was disabled: its sessions and answers were stopped.",
	"enabled":  "The account was enabled.",
	"admin":    "The account is now an administrator.",
	"member":   "The account is now a member.",
	"deleted":  "The account and all its data were deleted.",
	"revoked":  "The invite was revoked.",
}

func (h *adminUsers) list(w http.ResponseWriter, r *http.Request) {
	h.renderList(w, r, http.StatusOK, "", "")
}

// renderList draws the list; inviteURL is a just-made invite link, shown
// this once.
func (h *adminUsers) renderList(w http.ResponseWriter, r *http.Request, status int, inviteURL, errMsg string) {
	q := r.URL.Query()
	search := queryText(r, "q")
	f := db.UserFilter{Query: search, Role: q.Get("role"), State: q.Get("state"), Limit: usersPageSize}
	if f.Role != db.RoleAdmin && f.Role != db.RoleMember {
		f.Role = ""
	}
	if f.State != "active" && f.State != "disabled" {
		f.State = ""
	}
	page, _ := strconv.Atoi(q.Get("page"))
	page = min(max(page, 1), usersMaxPage) // its offset fits the query's
	f.Offset = (page - 1) * usersPageSize
	users, total, err := h.store.ListUsers(r.Context(), f)
	if err != nil {
		serverError(w, r, err)
		return
	}
	invites, err := h.store.Invites(r.Context(), 100)
	if err != nil {
		serverError(w, r, err)
		return
	}
	mode, err := h.store.SignupMode(r.Context())
	if err != nil {
		serverError(w, r, err)
		return
	}
	me, _ := currentUser(r)
	if inviteURL != "" {
		// The link is a secret shown once: no cache keeps the answer.
		w.Header().Set("Cache-Control", "no-store")
	}
	d := views.UsersPage{Users: users, Total: total, Filter: f, Page: page, PageSize: usersPageSize, Me: me.ID,
		Notice: usersNotices[q.Get("done")], Error: errMsg, SignupMode: mode, Invites: invites, InviteURL: inviteURL,
		Now: time.Now()}
	h.shell.page(w, r, status, "Users", views.AdminUsers(d))
}

func (h *adminUsers) show(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	h.renderUser(w, r, http.StatusOK, id, "", "")
}

// renderUser draws one account's page; resetURL is a just-made reset link.
func (h *adminUsers) renderUser(w http.ResponseWriter, r *http.Request, status int, id int64, resetURL, errMsg string) {
	u, err := h.store.AdminUser(r.Context(), id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	held, err := h.store.Holdings(r.Context(), id)
	if err != nil {
		serverError(w, r, err)
		return
	}
	me, _ := currentUser(r)
	d := views.UserPage{User: u, Holdings: held, Me: me.ID, ResetURL: resetURL, Error: errMsg, Now: time.Now()}
	if resetURL != "" {
		d.ResetExpires = time.Now().Add(resetLinkTTL)
		// The link is a secret shown once: no cache keeps the answer.
		w.Header().Set("Cache-Control", "no-store")
	}
	h.shell.page(w, r, status, u.Email, views.AdminUser(d))
}

// setDisabled disables (ending the account's sessions, their event streams
// and its runs) or enables an account.
func (h *adminUsers) setDisabled(disabled bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := pathID(w, r, "id")
		if !ok {
			return
		}
		me, _ := currentUser(r)
		ended, err := h.store.SetUserDisabled(r.Context(), me.ID, id, disabled)
		if h.refused(w, r, err) {
			return
		}
		h.endStreams(ended)
		done := "enabled"
		if disabled {
			done = "disabled"
			if err := h.runs.StopUserRuns(r.Context(), id); err != nil {
				serverError(w, r, err)
				return
			}
		}
		slog.InfoContext(r.Context(), "account "+done, "user", id, "by", me.ID)
		h.back(w, r, id, done)
	}
}

func (h *adminUsers) setRole(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	role := r.PostForm.Get("role")
	if role != db.RoleAdmin && role != db.RoleMember {
		badRequest(w, r, "The role is either admin or member.")
		return
	}
	me, _ := currentUser(r)
	if h.refused(w, r, h.store.SetUserRole(r.Context(), me.ID, id, role)) {
		return
	}
	slog.InfoContext(r.Context(), "account role changed", "user", id, "role", role, "by", me.ID)
	h.back(w, r, id, role)
}

// resetLink makes a one-time password-reset link and shows it this once.
func (h *adminUsers) resetLink(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	me, _ := currentUser(r)
	token := rand.Text() // 130 bits
	if err := h.store.CreatePasswordReset(r.Context(), me.ID, id, token, time.Now().Add(resetLinkTTL)); err != nil {
		storeError(w, r, err)
		return
	}
	slog.InfoContext(r.Context(), "password reset link made", "user", id, "by", me.ID)
	h.renderUser(w, r, http.StatusOK, id, absoluteURL(r, h.publicURL, "/reset/"+token), "")
}

// delete deletes an account with all its data after its email was typed:
// its runs are stopped first, then one transaction deletes the rows; its
// sessions' streams end, its workspace folders are removed and its files
// released for the blob collector.
func (h *adminUsers) delete(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	me, _ := currentUser(r)
	target, err := h.store.AdminUser(r.Context(), id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	if !strings.EqualFold(strings.TrimSpace(r.PostForm.Get("confirm")), target.Email) {
		h.renderUser(w, r, http.StatusUnprocessableEntity, id, "", "Type the account's email address exactly to delete it.")
		return
	}
	// Refuse the last administrator before stopping anything of theirs
	// (DeleteUser decides again under its lock).
	if target.Role == db.RoleAdmin && !target.Disabled {
		if n, err := h.store.EnabledAdmins(r.Context()); err != nil {
			serverError(w, r, err)
			return
		} else if n <= 1 {
			errorPage(w, r, http.StatusConflict, msgLastAdmin)
			return
		}
	}
	if err := h.runs.StopUserRuns(r.Context(), id); err != nil {
		serverError(w, r, err)
		return
	}
	del, err := h.store.DeleteUser(r.Context(), me.ID, id, r.PostForm.Get("confirm"))
	if errors.Is(err, db.ErrConfirm) {
		h.renderUser(w, r, http.StatusUnprocessableEntity, id, "", "Type the account's email address exactly to delete it.")
		return
	}
	if h.refused(w, r, err) {
		return
	}
	h.cleanUp(context.WithoutCancel(r.Context()), del)
	slog.InfoContext(r.Context(), "account deleted", "user", id, "by", me.ID, "workspaces", len(del.Workspaces),
		"released_blobs", len(del.Released))
	h.back(w, r, id, "deleted")
}

// cleanUp removes what a deleted account left outside the database: its
// sessions' event streams, its workspace folders and its files (released
// to the blob collector, which keeps files younger than its grace).
func (h *adminUsers) cleanUp(ctx context.Context, del db.DeletedUser) {
	h.endStreams(del.Sessions)
	for _, ws := range del.Workspaces {
		if ws.RootPath != "" {
			continue // a folder chosen for it is not Weft's to remove
		}
		if err := os.RemoveAll(h.workspaceRoot(ws)); err != nil {
			slog.WarnContext(ctx, "remove a deleted account's workspace folder", "workspace", ws.ID, "err", err)
		}
	}
	h.blobs.Release(ctx, del.Released)
}

// refused answers an administrator's change that failed; false when err
// is nil.
func (h *adminUsers) refused(w http.ResponseWriter, r *http.Request, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, db.ErrLastAdmin):
		errorPage(w, r, http.StatusConflict, msgLastAdmin)
	case errors.Is(err, db.ErrNotAdmin):
		errorPage(w, r, http.StatusForbidden, msgNotAdmin)
	default:
		storeError(w, r, err)
	}
	return true
}

// endStreams ends the event streams of sessions just ended, on this
// instance (others end theirs at their next sweep of the sessions table).
func (h *adminUsers) endStreams(tokens []string) {
	for _, t := range tokens {
		h.streams.endSession(t)
	}
}

// back returns to the list after an action on target; an administrator
// who just signed themselves out (disabled or deleted their own account)
// lands on the sign-in page.
func (h *adminUsers) back(w http.ResponseWriter, r *http.Request, target int64, done string) {
	if me, _ := currentUser(r); target == me.ID && (done == "disabled" || done == "deleted") {
		redirect(w, r, "/login")
		return
	}
	redirect(w, r, "/admin/users?done="+done)
}
