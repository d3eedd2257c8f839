package chat

import (
	"context"
	"fmt"

	"weft/db"
	"weft/internal/usererr"
)

// StepSettler settles an agent run's approvals and questions (package
// agent's Agent): the Config.Agent of a runtime that has rooms' agent
// routes.
type StepSettler interface {
	Decide(ctx context.Context, user, step int64, decision string) (db.Step, error)
	AnswerQuestion(ctx context.Context, user, step int64, answers []string,
		get func(ctx context.Context, user, id int64) (db.Step, db.Run, error)) (db.Step, error)
}

// ErrRoomDecision refuses an approval decision a room does not take: a
// grant for the rest of the thread or a change of the workspace's rule
// would outlive the asker's one request, and the room's thread and
// workspace are its owner's.
var ErrRoomDecision = usererr.New("In a room, a tool call is allowed once or denied.")

// RoomDecide settles an approval of an answer of the room (run; the step
// may be one of its sub-agents'): only the member who asked for the
// answer may; anyone else is refused with ErrNotAsker ("Only <asker> can
// decide this approval."). decision is db.DecideOnce or db.DecideDeny
// (others: ErrRoomDecision). A step of another run or room is
// db.ErrNotFound; one already settled is db.ErrDecided.
func (rt *Runtime) RoomDecide(ctx context.Context, user int64, room db.Room, run, step int64, decision string) error {
	settler, ok := rt.cfg.Agent.(StepSettler)
	if !ok {
		return usererr.New("The agent is not available on this server.")
	}
	if decision != db.DecideOnce && decision != db.DecideDeny {
		return ErrRoomDecision
	}
	room, err := rt.roomStep(ctx, user, room, run, step, db.StepApproval, "decide this approval")
	if err != nil {
		return err
	}
	_, err = settler.Decide(ctx, room.OwnerID, step, decision)
	return err
}

// RoomAnswer answers a question of an answer of the room (run; the step
// may be one of its sub-agents'), one answer per question, each one of
// its options: only the member who asked for the answer may (else
// ErrNotAsker, "Only <asker> can answer this question."). A step of
// another run or room is db.ErrNotFound; one already settled is
// db.ErrDecided.
func (rt *Runtime) RoomAnswer(ctx context.Context, user int64, room db.Room, run, step int64, answers []string) error {
	settler, ok := rt.cfg.Agent.(StepSettler)
	if !ok {
		return usererr.New("The agent is not available on this server.")
	}
	room, err := rt.roomStep(ctx, user, room, run, step, db.StepQuestion, "answer this question")
	if err != nil {
		return err
	}
	_, err = settler.AnswerQuestion(ctx, room.OwnerID, step, answers, rt.stepOf)
	return err
}

// roomStep checks that user, a member of room, asked for the answer that
// step (of kind) belongs to — its run's, or one of its sub-agents' — named
// by run (the answer's run, or the sub-agent's own); it returns the room
// as read now.
func (rt *Runtime) roomStep(ctx context.Context, user int64, room db.Room, run, step int64, kind, action string) (db.Room, error) {
	var turn db.RoomTurn
	err := rt.store.ReadSnapshot(ctx, func(s *db.DB) error {
		var err error
		if room, err = s.RoomForMember(ctx, user, room.ID); err != nil {
			return err
		}
		st, of, err := s.StepOf(ctx, room.OwnerID, step)
		if err != nil {
			return err
		}
		// The page names a sub-agent's step with the sub-agent's run
		// (views.stepURL: the step's own); the rule is its answer's.
		own := of.ID
		if of.ParentRunID != nil {
			if of, err = s.Run(ctx, room.OwnerID, *of.ParentRunID); err != nil {
				return err
			}
		}
		if st.Kind != kind || (run != of.ID && run != own) || of.ThreadID != room.ThreadID {
			return db.ErrNotFound
		}
		turn, err = s.RoomRun(ctx, room.OwnerID, room.ThreadID, of.ID)
		return err
	})
	if err != nil {
		return db.Room{}, err
	}
	if turn.AskedBy == nil || *turn.AskedBy != user {
		return db.Room{}, usererr.Wrap(ErrNotAsker, fmt.Sprintf("Only %s can %s.", askerName(turn), action))
	}
	return room, nil
}

// stepOf reads one of user's steps with its run.
func (rt *Runtime) stepOf(ctx context.Context, user, id int64) (db.Step, db.Run, error) {
	var st db.Step
	var r db.Run
	err := rt.store.ReadSnapshot(ctx, func(s *db.DB) error {
		var err error
		st, r, err = s.StepOf(ctx, user, id)
		return err
	})
	return st, r, err
}
