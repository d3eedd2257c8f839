package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"weft/chat"
	"weft/db"
	"weft/internal/usererr"
	"weft/views"
)

// roomRunControls is the runtime as a room's answer controls use it: each
// call applies the room's own rule (Stop: the asker or the owner) after the
// membership the handler checked.
type roomRunControls interface {
	RoomStop(ctx context.Context, user int64, room db.Room, run int64) error
}

// roomRuns serves the controls of a room's answers.
type roomRuns struct {
	store interface {
		RoomForMember(ctx context.Context, user, room int64) (db.Room, error)
	}
	rt roomRunControls
}

// pathRoom reads the room of the path for its member (anyone else: 404).
func (h *roomRuns) pathRoom(w http.ResponseWriter, r *http.Request) (int64, db.Room, bool) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return 0, db.Room{}, false
	}
	room, err := h.store.RoomForMember(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return 0, db.Room{}, false
	}
	return u.ID, room, true
}

// stop serves POST /rooms/{id}/runs/{run}/stop: Stop on an answer being
// written, Cancel on a queued one, by its asker or the room's owner.
func (h *roomRuns) stop(w http.ResponseWriter, r *http.Request) {
	user, room, ok := h.pathRoom(w, r)
	if !ok {
		return
	}
	run, ok := pathID(w, r, "run")
	if !ok {
		return
	}
	h.done(w, r, room, h.rt.RoomStop(r.Context(), user, room, run))
}

// done answers a control: the room's stream shows the outcome; a refusal
// (not the asker) is said in the room's notice.
func (h *roomRuns) done(w http.ResponseWriter, r *http.Request, room db.Room, err error) {
	switch {
	case errors.Is(err, chat.ErrNotAsker):
		msg, _ := usererr.Message(err)
		if isHTMX(r) {
			w.Header().Set("HX-Retarget", "#room-notice")
			w.Header().Set("HX-Reswap", "innerHTML")
			render(w, r, http.StatusUnprocessableEntity, views.RoomNotice(msg))
			return
		}
		errorPage(w, r, http.StatusForbidden, msg)
		return
	case err != nil:
		storeError(w, r, err)
		return
	}
	if isHTMX(r) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	redirect(w, r, fmt.Sprintf("/rooms/%d", room.ID))
}
