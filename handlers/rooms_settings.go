package handlers

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"unicode/utf8"

	"weft/db"
	"weft/views"
)

// saveSettings serves POST /rooms/{id}/settings (fields name,
// default_agent, mention_depth, summarize_at, history_messages,
// keep_recent).
func (h *roomPages) saveSettings(w http.ResponseWriter, r *http.Request) {
	u, room, ok := h.ownedRoom(w, r)
	if !ok || !parseForm(w, r) {
		return
	}
	agents, err := h.store.RoomAgents(r.Context(), u.ID, room.ID)
	if err != nil {
		storeError(w, r, err)
		return
	}
	f, s, msg := parseRoomSettings(r, agents)
	if msg != "" {
		h.renderRoom(w, r, http.StatusUnprocessableEntity, u, room, views.RoomForms{Settings: f, SettingsError: msg})
		return
	}
	if err := h.store.UpdateRoomSettings(r.Context(), u.ID, room.ID, s); err != nil {
		storeError(w, r, err)
		return
	}
	h.shell.sessions.Put(r.Context(), sessionFlash, "The room's settings were saved.")
	redirect(w, r, roomURL(room.ID))
}

// parseRoomSettings reads the settings form; msg says what is wrong.
func parseRoomSettings(r *http.Request, agents []db.RoomAgent) (f views.RoomSettingsForm, s db.RoomSettings, msg string) {
	get := func(k string) string { return cleanText(r.PostForm.Get(k)) }
	f = views.RoomSettingsForm{Name: oneLine(r.PostForm.Get("name")), DefaultAgent: get("default_agent"),
		MentionDepth: get("mention_depth"), SummarizeAt: get("summarize_at"),
		HistoryMessages: get("history_messages"), KeepRecent: get("keep_recent")}
	s.Name = f.Name
	if s.Name == "" || utf8.RuneCountInString(s.Name) > maxRoomName {
		return f, s, "A room needs a name of 1 to 120 characters."
	}
	if f.DefaultAgent != "" {
		id, _ := strconv.ParseInt(f.DefaultAgent, 10, 64)
		for _, a := range agents {
			if a.ID == id {
				s.DefaultAgentID = &a.ID
			}
		}
		if s.DefaultAgentID == nil {
			return f, s, "The default agent must be one of the room's agents."
		}
	}
	for _, n := range []struct {
		text, name string
		lo, hi     int
		dst        *int
	}{
		{f.MentionDepth, "Mention depth", 0, 8, &s.MentionDepth},
		{f.SummarizeAt, "Summarize at", 10, 100, &s.SummarizeAt},
		{f.HistoryMessages, "History sent", 0, 10000, &s.HistoryMessages},
		{f.KeepRecent, "Recent messages kept", 0, 200, &s.KeepRecent},
	} {
		v, err := strconv.Atoi(n.text)
		if err != nil || v < n.lo || v > n.hi {
			return f, s, fmt.Sprintf("%s must be a whole number from %d to %d.", n.name, n.lo, n.hi)
		}
		*n.dst = v
	}
	return f, s, ""
}

// delete serves POST /rooms/{id}/delete (field confirm: the room's name,
// typed): the room goes with its thread, messages, runs and agents, for
// every member; their open streams end when they hear of it.
func (h *roomPages) delete(w http.ResponseWriter, r *http.Request) {
	u, room, ok := h.ownedRoom(w, r)
	if !ok || !parseForm(w, r) {
		return
	}
	if oneLine(r.PostForm.Get("confirm")) != room.Name {
		h.renderRoom(w, r, http.StatusUnprocessableEntity, u, room, views.RoomForms{
			DeleteError: "To delete the room, type its name exactly as it is shown."})
		return
	}
	released, err := h.rt.DeleteThread(r.Context(), u.ID, room.ThreadID)
	if err != nil {
		storeError(w, r, err)
		return
	}
	if err := h.store.NoteRoomChanged(r.Context(), room.ThreadID); err != nil {
		// Best effort: a lost note costs the streams a safety re-read.
		slog.WarnContext(r.Context(), "note a deleted room", "room", room.ID, "err", err)
	}
	slog.InfoContext(r.Context(), "room deleted", "room", room.ID, "released_blobs", len(released))
	h.blobs.Release(r.Context(), released)
	h.shell.sessions.Put(r.Context(), sessionFlash, fmt.Sprintf("The room %s was deleted.", room.Name))
	redirect(w, r, "/rooms")
}
