package handlers

import (
	"context"
	"net/url"

	"weft/agent"
	"weft/db"
	"weft/views"
)

// skillStates are the workspace's skills as /tools shows them.
func (h *agentPages) skillStates(ctx context.Context, user int64, ws db.Workspace) ([]views.SkillState, error) {
	list, err := h.ag.Skills(ctx, user, ws)
	if err != nil {
		return nil, err
	}
	out := make([]views.SkillState, len(list))
	for i, s := range list {
		out[i] = views.SkillState{Name: s.Name, Description: s.Description, Origin: s.Origin, Overrides: s.Overrides,
			Enabled: s.Enabled, Problem: s.Problem}
	}
	return out, nil
}

// saveSkills keeps the switches of the skills the form showed (each named
// by a "skill" field, switched on by "skill_on_NAME"), as the workspace's
// "skill:NAME" rules. A skill that is not there now is left alone, so a
// forged form cannot fill the rules table.
func (h *agentPages) saveSkills(ctx context.Context, user int64, ws db.Workspace, form url.Values) error {
	shown := form["skill"]
	if len(shown) == 0 {
		return nil
	}
	list, err := h.ag.Skills(ctx, user, ws)
	if err != nil {
		return err
	}
	exists := make(map[string]bool, len(list))
	for _, s := range list {
		exists[s.Name] = s.Problem == ""
	}
	for _, name := range shown {
		if !exists[name] || !agent.ValidSkillName(name) {
			continue
		}
		exists[name] = false // once
		if err := h.store.SetToolPolicy(ctx, user, ws.ID, agent.SkillRule(name), form.Get("skill_on_"+name) == "on", agent.ModeAuto); err != nil {
			return err
		}
	}
	return nil
}
