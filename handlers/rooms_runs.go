package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"

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
	RoomDecide(ctx context.Context, user int64, room db.Room, run, step int64, decision string) error
	RoomAnswer(ctx context.Context, user int64, room db.Room, run, step int64, answers []string) error
}

// roomRuns serves the controls of a room's answers (Stop, approvals,
// questions): the membership first (anyone else: 404), then the room's
// rule in the runtime. The room's stream shows the outcome; a refusal is
// said in the room's notice (an htmx request) or on a 403 page.
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

// decide serves POST /rooms/{id}/runs/{run}/steps/{step}/decide (field
// decision: once or deny): an approval of an answer, by its asker.
func (h *roomRuns) decide(w http.ResponseWriter, r *http.Request) {
	user, room, run, step, ok := h.pathStep(w, r)
	if !ok {
		return
	}
	h.done(w, r, room, h.rt.RoomDecide(r.Context(), user, room, run, step, r.PostForm.Get("decision")))
}

// answer serves POST /rooms/{id}/runs/{run}/steps/{step}/answer (fields
// a0…a3, one per question): a question of an answer, by its asker.
func (h *roomRuns) answer(w http.ResponseWriter, r *http.Request) {
	user, room, run, step, ok := h.pathStep(w, r)
	if !ok {
		return
	}
	var answers []string
	for i := range 4 {
		if v, ok := r.PostForm["a"+strconv.Itoa(i)]; ok && len(v) > 0 {
			answers = append(answers, v[0])
		}
	}
	h.done(w, r, room, h.rt.RoomAnswer(r.Context(), user, room, run, step, answers))
}

// pathStep reads a step control's room (for its member), run and step,
// and its form.
func (h *roomRuns) pathStep(w http.ResponseWriter, r *http.Request) (user int64, room db.Room, run, step int64, ok bool) {
	if user, room, ok = h.pathRoom(w, r); !ok {
		return
	}
	if run, ok = pathID(w, r, "run"); !ok {
		return
	}
	if step, ok = pathID(w, r, "step"); !ok {
		return
	}
	ok = parseForm(w, r)
	return
}

// done answers a control: the room's stream shows the outcome.
func (h *roomRuns) done(w http.ResponseWriter, r *http.Request, room db.Room, err error) {
	msg, shown := usererr.Message(err)
	switch {
	case errors.Is(err, db.ErrDecided):
		// Settled already (the timeout, Stop, another tab): the stream
		// shows how.
	case err != nil && shown:
		// Not the asker (or owner), or a decision a room does not take.
		if isHTMX(r) {
			w.Header().Set("HX-Retarget", "#room-notice")
			w.Header().Set("HX-Reswap", "innerHTML")
			render(w, r, http.StatusUnprocessableEntity, views.RoomNotice(msg))
			return
		}
		code := http.StatusBadRequest
		if errors.Is(err, chat.ErrNotAsker) {
			code = http.StatusForbidden
		}
		errorPage(w, r, code, msg)
		return
	case err != nil:
		// Not found (another room's run, a settled answer's gone step) or
		// a failure.
		storeError(w, r, err)
		return
	}
	if isHTMX(r) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	redirect(w, r, roomURL(room.ID))
}
