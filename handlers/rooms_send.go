package handlers

import (
	"net/http"

	"weft/internal/usererr"
	"weft/views"
)

// send serves POST /rooms/{id}/messages (field content): a member's
// message to the room, answered by the agents it mentions (or the room's
// default agent). The room's stream shows the message and the answers to
// every member, the sender included: an htmx send gets a 204 (the
// composer clears), a plain form goes back to the room.
func (h *roomPages) send(w http.ResponseWriter, r *http.Request) {
	u, room, ok := h.pathRoom(w, r)
	if !ok || !parseForm(w, r) {
		return
	}
	content := r.PostForm.Get("content")
	if _, err := h.rt.RoomSend(r.Context(), u.ID, room, content); err != nil {
		msg, shown := usererr.Message(err)
		if !shown {
			storeError(w, r, err)
			return
		}
		if isHTMX(r) {
			composerNotice(w, r, http.StatusUnprocessableEntity, views.ComposerNotice(msg, true))
			return
		}
		h.renderRoom(w, r, http.StatusUnprocessableEntity, u, room, views.RoomForms{ComposerError: msg, Content: content})
		return
	}
	if isHTMX(r) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	redirect(w, r, roomURL(room.ID))
}
