package views

import "weft/db"

// Names of the events of a thread page's live watch (GET /t/{id}/watch,
// issue 21): what another tab or device added to the branch the page shows,
// a notice when the thread's branch moved elsewhere, and the thread's end.
const (
	// EventThreadAppend adds one message (with its markers) to the end of
	// the page; an answer being written comes as its Placeholder, which
	// opens its own run stream. Its SSE id is the message id: a browser
	// reconnecting by itself resumes after it. app.js drops an append of a
	// message the page already shows in the same state (the tab that sent
	// it drew it from its own send).
	EventThreadAppend = "thread-append"
	// EventThreadChanged fills the page's notice (ThreadChanged) when the
	// thread's active branch no longer continues the page, and empties it
	// when it does again.
	EventThreadChanged = "thread-changed"
	// EventThreadGone says the thread was deleted and closes the watch
	// (sse-close).
	EventThreadGone = "thread-gone"
)

// MsgThreadChanged and MsgThreadGone are the live watch's notices.
const (
	MsgThreadChanged = "This thread changed in another tab."
	MsgThreadGone    = "This thread was deleted in another tab."
)

// ThreadWatchPoint is where a thread page's live watch starts: the last
// message the page shows, and the run of that message when the page shows
// it being written (0: none).
func ThreadWatchPoint(ms []MessageView) (leaf, run int64) {
	if len(ms) == 0 {
		return 0, 0
	}
	last := ms[len(ms)-1]
	if last.Run != nil && last.Message.Status == db.MsgStreaming {
		run = last.Run.ID
	}
	return last.Message.ID, run
}

// threadWatchURL is the live watch of a thread page showing ms.
func threadWatchURL(thread int64, ms []MessageView) string {
	leaf, run := ThreadWatchPoint(ms)
	return threadURL(thread) + "/watch?leaf=" + id(leaf) + "&run=" + id(run)
}
