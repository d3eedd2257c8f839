package app

import (
	"testing"
	"time"
)

// A command gets the whole wall-clock timeout the administrator set: the
// agent's timeout of the tool call outlasts it. With both at their
// defaults (60 s) the sandbox, which ends a command 2 s before the call's
// deadline, gave it 58 s less the workspace's first snapshot.
func TestAToolCallOutlastsTheSandboxesTimeout(t *testing.T) {
	for _, c := range []struct{ agent, shell, want time.Duration }{
		{0, 0, 65 * time.Second},
		{0, 60 * time.Second, 65 * time.Second},
		{30 * time.Second, 50 * time.Second, 55 * time.Second},
		{0, 10 * time.Second, 60 * time.Second},
		{120 * time.Second, 10 * time.Second, 120 * time.Second},
		{0, 300 * time.Second, 305 * time.Second},
	} {
		if got := toolTimeout(c.agent, c.shell); got != c.want {
			t.Errorf("toolTimeout(%s, %s) = %s, want %s", c.agent, c.shell, got, c.want)
		}
	}
}
