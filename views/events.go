package views

// Names of the server-sent events of a run stream (GET /runs/{id}/events).
// The stream handler sends them and the placeholder's sse-swap attributes
// listen for them, so both use these constants.
const (
	// EventSnapshot replaces the answer text with the run's text so far and
	// EventSnapshotThinking the thinking text: they are the first events of
	// every (re)connection, so nothing is duplicated or missing.
	EventSnapshot         = "snapshot"
	EventSnapshotThinking = "snapshot-thinking"
	// EventDelta appends answer text.
	EventDelta = "delta"
	// EventThinking appends thinking text.
	EventThinking = "thinking"
	// EventStatus replaces the run bar (queued → running).
	EventStatus = "status"
	// EventTrace replaces an agent run's trace (its tool cards, approvals
	// and questions) with its current state.
	EventTrace = "trace"
	// EventDone replaces the placeholder with the final message and closes
	// the stream (sse-close), so the browser does not reconnect.
	EventDone = "done"
)
