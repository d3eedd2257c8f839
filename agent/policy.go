package agent

import (
	"fmt"

	"weft/db"
)

// Modes of a tool: run without asking, ask the user first, or never run.
const (
	ModeAuto = "auto"
	ModeAsk  = "ask"
	ModeDeny = "deny"
)

// Defaults is the policy of a tool without a workspace rule: read-only
// tools run without asking, changes ask first, the network is off.
func Defaults(c Class) (enabled bool, mode string) {
	switch c {
	case ClassWrite, ClassExec:
		return true, ModeAsk
	case ClassNetwork:
		return false, ModeAsk
	default:
		return true, ModeAuto
	}
}

// Availability is the one projection of whether a tool can run, and why
// not: the tool settings page, the composer and the run trace all show
// Reason.
type Availability struct {
	Tool    Tool
	Enabled bool
	Mode    string
	// Rule: the mode comes from a workspace rule (not the default).
	Rule bool
	// Granted: approved for the rest of this thread.
	Granted bool
	// Available: the model is offered the tool.
	Available bool
	// Asks: a call waits for the user's approval.
	Asks bool
	// Reason says why the tool is unavailable ("" when it is available).
	Reason string
}

// AnyModel, as Explain's model, judges the tools alone (the tool settings
// page): no model check.
const AnyModel = "\x00any model"

// Explain decides a tool's availability from the workspace rule (nil: the
// defaults), a "this thread" grant, and whether the model can call tools
// at all (modelKnown false: the model server did not list the model).
func Explain(t Tool, rule *db.ToolPolicy, granted bool, model string, modelTools, modelKnown bool) Availability {
	av := Availability{Tool: t, Granted: granted}
	av.Enabled, av.Mode = Defaults(t.Class)
	if rule != nil {
		av.Enabled, av.Mode, av.Rule = rule.Enabled, rule.Mode, true
	}
	if t.Class == ClassAsk && av.Mode == ModeAsk {
		av.Mode = ModeAuto // a question is itself asking the user
	}
	switch {
	case t.Unavailable != "":
		av.Reason = t.Unavailable
	case !av.Enabled && !av.Rule && t.Class == ClassNetwork:
		av.Reason = "Off by default: it reaches the internet. Enable it in this workspace's tool settings."
	case !av.Enabled:
		av.Reason = "Disabled in this workspace's tool settings."
	case av.Mode == ModeDeny:
		av.Reason = "Denied by this workspace's rule."
	case model == AnyModel:
	case model == "":
		av.Reason = "No model is chosen for this thread."
	case modelKnown && !modelTools:
		av.Reason = fmt.Sprintf("The model %s cannot call tools: choose a model with tool support.", model)
	}
	av.Available = av.Reason == ""
	av.Asks = av.Available && av.Mode == ModeAsk && !granted
	return av
}

// ExplainAll lists the availability of every tool for a thread.
func (a *Agent) ExplainAll(rules map[string]db.ToolPolicy, grants map[string]bool, model string, modelTools, modelKnown bool) []Availability {
	tools := a.Tools()
	out := make([]Availability, 0, len(tools))
	for _, t := range tools {
		var rule *db.ToolPolicy
		if p, ok := rules[t.Name]; ok {
			rule = &p
		}
		out = append(out, Explain(t, rule, grants[t.Name], model, modelTools, modelKnown))
	}
	return out
}
