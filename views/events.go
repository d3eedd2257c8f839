package views

// Names of the server-sent events of a run stream (GET /runs/{id}/events).
// The stream handler sends them and the placeholder's sse-swap attributes
// listen for them, so both use these constants.
const (
	// EventSnapshot replaces the streamed body with the run's current state;
	// it is the first event of every (re)connection.
	EventSnapshot = "snapshot"
	// EventDelta appends answer text.
	EventDelta = "delta"
	// EventThinking appends thinking text.
	EventThinking = "thinking"
	// EventStatus replaces the run bar (queued → running).
	EventStatus = "status"
	// EventDone replaces the placeholder with the final message and closes
	// the stream (sse-close), so the browser does not reconnect.
	EventDone = "done"
)
