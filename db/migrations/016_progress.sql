-- The progress of an answer being written, append-only: every flush adds
-- one row with the text appended since the previous flush (answer and
-- thinking), instead of rewriting the message row with the whole text so
-- far (n² bytes of row data, WAL and search data for an answer of n
-- tokens). While a message is streaming its text is messages.content
-- followed by its rows in seq order (db.liveCols); the run's final write
-- stores the whole text on the message once and deletes the rows in the
-- same transaction, and settling a run whose instance died folds them in.
-- A message's thinking, when some rows carry it, is theirs joined: a run
-- writes its thinking anew (a continued answer thinks again).
CREATE TABLE message_progress (
    message_id bigint NOT NULL REFERENCES messages ON DELETE CASCADE,
    seq        integer NOT NULL,
    content    text NOT NULL DEFAULT '',
    thinking   text NOT NULL DEFAULT '',
    PRIMARY KEY (message_id, seq)
);
