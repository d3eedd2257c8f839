package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// The system message names each reason a tool is unavailable once, with
// the tools it holds for: a server with many tools that is down costs the
// model's context its tools' names, not its reason repeated for each.
func TestTheSystemMessageGroupsUnavailableToolsByReason(t *testing.T) {
	const down = "The MCP server big is not reachable: the connection was refused."
	var tools fixedProvider
	for i := range 60 {
		tools = append(tools, Tool{Name: fmt.Sprintf("big__t%d", i), Class: ClassRead, Unavailable: down})
	}
	tools = append(tools, Tool{Name: "small__x", Class: ClassRead, Unavailable: "The MCP server small no longer offers this tool."})
	a := New(nil, nil, nil, Config{})
	a.AddProvider(tools)
	x := &run{a: a, env: &Env{Root: "/w"}}
	msg := x.routeContext(context.Background(), a.ExplainAll(nil, nil, "m", true, true))
	if n := strings.Count(msg, down); n != 1 {
		t.Errorf("the reason is written %d times", n)
	}
	if !strings.Contains(msg, "big__t0, big__t1, ") || !strings.Contains(msg, "big__t59 ("+down+")") {
		t.Errorf("the unavailable tools are not named with their reason: %s", msg)
	}
	if !strings.Contains(msg, "big__t59 ("+down+"); small__x (The MCP server small no longer offers this tool.).") {
		t.Errorf("each reason is not a group of its own: %s", msg)
	}
}
