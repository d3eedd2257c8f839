package handlers

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"weft/db"
)

// A room's thread (issue 20) is reached only through its room: its
// messages, runs and approvals follow the room's rules (who may stop an
// answer, who decides an approval), which the thread routes do not know.
// So every thread route whose id names a room's thread, or a message, run
// or step of one, answers as if it did not exist; only GET /t/{id} sends
// the thread's owner to the room instead. Everyone else already gets a 404
// there (the thread is the room owner's). The thread routes a room uses
// are GET /m/{id}/sources/{n}, a citation of an answer, and GET
// /m/{id}/markdown, a message's copy: they read, and they open for every
// member of the room (kbs.source, messageMarkdown).

type roomThreadStore interface {
	InRoomThread(ctx context.Context, user int64, kind string, id int64) (bool, error)
	RoomOfThread(ctx context.Context, user, thread int64) (int64, error)
}

// threadRouteKinds maps the first segment of a thread route's path to what
// its id names.
var threadRouteKinds = map[string]string{
	"t":     db.ObjThread,
	"m":     db.ObjMessage,
	"runs":  db.ObjRun,
	"steps": db.ObjStep,
}

// hideRoomThreads is the middleware of the signed-in groups that keeps the
// thread routes off rooms' threads (one indexed look-up on those routes,
// none elsewhere).
func hideRoomThreads(s roomThreadStore) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			kind, id, rest := threadRoute(r.URL.Path)
			u, signedIn := currentUser(r)
			if kind == "" || !signedIn || readsSource(kind, rest, r.Method) {
				next.ServeHTTP(w, r)
				return
			}
			in, err := s.InRoomThread(r.Context(), u.ID, kind, id)
			if err != nil {
				serverError(w, r, err)
				return
			}
			if !in {
				next.ServeHTTP(w, r)
				return
			}
			if kind == db.ObjThread && rest == "" && r.Method == http.MethodGet {
				room, err := s.RoomOfThread(r.Context(), u.ID, id)
				if err != nil {
					storeError(w, r, err)
					return
				}
				http.Redirect(w, r, roomURL(room), http.StatusSeeOther)
				return
			}
			notFound(w, r)
		})
	}
}

// threadRoute reads a thread route's path (/t/12/rename: thread 12,
// "rename"); kind is empty for any other path.
func threadRoute(path string) (kind string, id int64, rest string) {
	first, tail, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if kind = threadRouteKinds[first]; kind == "" {
		return "", 0, ""
	}
	num, rest, _ := strings.Cut(tail, "/")
	id, err := strconv.ParseInt(num, 10, 64)
	if err != nil || id <= 0 {
		return "", 0, ""
	}
	return kind, id, rest
}

// readsSource reports whether a thread route is GET /m/{id}/sources/{n} or
// GET /m/{id}/markdown: what a room's members read of its messages.
func readsSource(kind, rest, method string) bool {
	return kind == db.ObjMessage && (strings.HasPrefix(rest, "sources/") || rest == "markdown") &&
		(method == http.MethodGet || method == http.MethodHead)
}
