package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"weft/db"
)

// waitFor waits until a step (approval or question) is settled, by this
// instance's handler (Wake) or any other (polling), or until its deadline.
// The run shows "waiting" meanwhile. A stop requested elsewhere stops it.
func (x *run) waitFor(ctx context.Context, step int64, deadline *time.Time) (db.Step, error) {
	wake, release := x.a.wakeChan(x.r.ID)
	defer release()
	bg := context.WithoutCancel(ctx)
	// Settled (even before an adopted run got here): running again.
	defer x.running(ctx)
	// A sub-agent's time budget does not run while its user decides.
	x.budget.pause()
	defer x.budget.resume()
	for {
		s, err := x.a.store.StepByID(ctx, x.r.ID, step)
		if err != nil {
			if ctx.Err() != nil {
				return db.Step{}, ctx.Err()
			}
			return db.Step{}, fmt.Errorf("read step: %w", err)
		}
		if s.Status != db.StepPending {
			return s, nil
		}
		if deadline != nil && !time.Now().Before(*deadline) {
			return s, nil
		}
		if !x.waiting {
			x.waiting = true
			stop, err := x.a.store.SetRunWaiting(bg, x.r.ID, true)
			if err != nil {
				return db.Step{}, fmt.Errorf("run waiting: %w", err)
			}
			x.h.SetStatus(db.RunWaiting)
			if stop {
				x.h.StopUser()
			}
		} else if stop, err := x.a.store.CancelRequested(ctx, x.r.ID); err == nil && stop {
			x.h.StopUser()
		}
		poll := x.a.cfg.PollEvery
		if deadline != nil {
			poll = min(poll, max(time.Until(*deadline), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return db.Step{}, ctx.Err()
		case <-wake:
		case <-time.After(poll):
		}
	}
}

// ask puts ask_user's questions to the user and waits for the answers; an
// unanswered question takes its recommended option after the timeout.
func (x *run) ask(ctx context.Context, s db.Step, args Args) error {
	p := &x.cp.Pending[0]
	qs, err := parseQuestions(args)
	if err != nil {
		var te *ToolError
		errors.As(err, &te)
		return x.finishCall(ctx, s, db.StepError, Result{}, te.Msg, "")
	}
	if p.Question == 0 {
		deadline := time.Now().Add(x.a.cfg.QuestionTimeout).UTC()
		if _, err := x.addStepAs(ctx, db.StepQuestion, db.StepPending, db.StepData{Questions: qs, Deadline: &deadline},
			func(id int64) { p.Question = id }); err != nil {
			return fmt.Errorf("record question: %w", err)
		}
	}
	q, err := x.a.store.StepByID(ctx, x.r.ID, p.Question)
	if err != nil {
		return fmt.Errorf("load question: %w", err)
	}
	q, err = x.waitFor(ctx, q.ID, q.Data.Deadline)
	if err != nil {
		return err
	}
	switch q.Status {
	case db.StepAnswered:
		return x.finishCall(ctx, s, db.StepOK, Result{Output: answersText(q.Data.Questions, q.Data.Answers, "The user answered:")}, "", "")
	case db.StepPending:
		answers := make([]string, len(q.Data.Questions))
		for i, qq := range q.Data.Questions {
			if qq.Recommended >= 0 && qq.Recommended < len(qq.Options) {
				answers[i] = qq.Options[qq.Recommended]
			}
		}
		settled, err := x.a.store.TimeoutQuestion(context.WithoutCancel(ctx), q.ID, answers)
		if errors.Is(err, db.ErrDecided) {
			return x.ask(ctx, s, args) // answered at the last moment
		}
		if err != nil {
			return fmt.Errorf("time out question: %w", err)
		}
		x.h.Stepped()
		return x.finishCall(ctx, s, db.StepOK, Result{Output: answersText(settled.Data.Questions, settled.Data.Answers,
			fmt.Sprintf("The user did not answer within %s; the recommended options were taken (none where no option was recommended):", x.a.cfg.QuestionTimeout))}, "", "")
	default:
		return context.Canceled
	}
}

// AnswerQuestion settles one of the user's questions with the chosen
// options (one per question, each one of its options) and wakes its run.
func (a *Agent) AnswerQuestion(ctx context.Context, user, step int64, answers []string, get func(ctx context.Context, user, id int64) (db.Step, db.Run, error)) (db.Step, error) {
	s, _, err := get(ctx, user, step)
	if err != nil {
		return db.Step{}, err
	}
	if s.Kind != db.StepQuestion {
		return db.Step{}, db.ErrNotFound
	}
	if len(answers) != len(s.Data.Questions) {
		return db.Step{}, ErrBadAnswer
	}
	for i, q := range s.Data.Questions {
		ok := false
		for _, o := range q.Options {
			ok = ok || o == answers[i]
		}
		if !ok {
			return db.Step{}, ErrBadAnswer
		}
	}
	s, err = a.store.Answer(ctx, user, step, answers)
	if err == nil {
		a.Wake(s.RunID)
	}
	return s, err
}

// ErrBadAnswer is an answer that does not pick one option per question.
var ErrBadAnswer = errors.New("choose one of the options for every question")
