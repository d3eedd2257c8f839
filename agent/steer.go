package agent

import (
	"context"
	"fmt"

	"github.com/ollama/ollama/api"

	"weft/db"
)

// steerStore is the part of the store that steering needs (db.DB has it;
// a store without it simply takes no steering messages).
type steerStore interface {
	TakeSteers(ctx context.Context, run int64, round int, build func(steers []db.Step) any) ([]db.Step, error)
}

// takeSteers is the round boundary's pick-up of /steer: the steering
// messages sent to the run since the last boundary, from any instance,
// are read from the database and appended to the run's own messages as
// user messages; their steps are marked taken with the checkpoint that
// holds them, in one transaction, so a resumed run neither loses nor
// repeats one.
func (x *run) takeSteers(ctx context.Context) error {
	st, ok := x.a.store.(steerStore)
	if !ok {
		return nil
	}
	before := len(x.cp.Messages)
	taken, err := st.TakeSteers(context.WithoutCancel(ctx), x.r.ID, x.cp.Round, func(steers []db.Step) any {
		x.cp.Messages = x.cp.Messages[:before]
		for _, s := range steers {
			x.cp.Messages = append(x.cp.Messages, api.Message{Role: db.RoleUser, Content: s.Data.Content})
		}
		return x.cp
	})
	if err != nil {
		x.cp.Messages = x.cp.Messages[:before]
		return fmt.Errorf("take steering messages: %w", err)
	}
	if len(taken) > 0 {
		x.h.Stepped()
	}
	return nil
}
