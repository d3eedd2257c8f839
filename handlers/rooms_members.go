package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"weft/db"
	"weft/views"
)

// maxEmail is the longest email address an invitation takes.
const maxEmail = 320

// invite serves POST /rooms/{id}/members (field email): the owner adds a
// user of this instance.
func (h *roomPages) invite(w http.ResponseWriter, r *http.Request) {
	u, room, ok := h.ownedRoom(w, r)
	if !ok || !parseForm(w, r) {
		return
	}
	email := cleanText(r.PostForm.Get("email"))
	refuse := func(msg string) {
		h.renderRoom(w, r, http.StatusUnprocessableEntity, u, room, views.RoomForms{Invite: email, InviteError: msg})
	}
	if email == "" || len(email) > maxEmail || !strings.Contains(email, "@") {
		refuse("Give the email address of someone with an account on this instance.")
		return
	}
	m, err := h.store.InviteRoomMember(r.Context(), u.ID, room.ID, email)
	switch {
	case errors.Is(err, db.ErrRoomNoUser):
		refuse(fmt.Sprintf("No active account on this instance uses %s.", email))
		return
	case errors.Is(err, db.ErrConflict):
		refuse(fmt.Sprintf("%s is already in this room.", email))
		return
	case err != nil:
		storeError(w, r, err)
		return
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, fmt.Sprintf("%s is now a member of %s.", m.Name(), room.Name))
	redirect(w, r, roomURL(room.ID))
}

// remove serves POST /rooms/{id}/members/{user}/remove: the owner takes a
// member out. Their access ends at once (their open streams end when they
// hear the change), and the answers they asked for that are still queued,
// running or waiting for them are stopped: nobody else could answer their
// approvals.
func (h *roomPages) remove(w http.ResponseWriter, r *http.Request) {
	u, room, ok := h.ownedRoom(w, r)
	if !ok {
		return
	}
	member, ok := pathID(w, r, "user")
	if !ok {
		return
	}
	if err := h.store.RemoveRoomMember(r.Context(), u.ID, room.ID, member); err != nil {
		storeError(w, r, err)
		return
	}
	if err := h.stopRuns(r.Context(), room, member, 0); err != nil {
		serverError(w, r, err)
		return
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, "The member was removed from the room.")
	redirect(w, r, roomURL(room.ID))
}

// leave serves POST /rooms/{id}/leave: a member leaves (the owner deletes
// the room instead). As with a removal, the answers they asked for stop.
func (h *roomPages) leave(w http.ResponseWriter, r *http.Request) {
	u, room, ok := h.pathRoom(w, r)
	if !ok {
		return
	}
	if room.IsOwner() {
		errorPage(w, r, http.StatusConflict, "You own this room, so you cannot leave it; delete it instead.")
		return
	}
	if err := h.store.LeaveRoom(r.Context(), u.ID, room.ID); err != nil {
		storeError(w, r, err)
		return
	}
	// The member is gone: their runs are stopped for the owner, whose
	// thread the room's is.
	if err := h.stopRuns(r.Context(), room, u.ID, 0); err != nil {
		serverError(w, r, err)
		return
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, fmt.Sprintf("You left %s.", room.Name))
	redirect(w, r, "/rooms")
}
