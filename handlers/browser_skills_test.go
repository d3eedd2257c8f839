package handlers_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"weft/agent"
	"weft/internal/testenv"
)

// TestBrowserSkillsAreSwitchedOnToolsAndLoadedByTheAgent: a person sees the
// workspace's and the instance's skills on /tools, switches one off, and
// the agent loads the other on demand, its call shown as a card.
func TestBrowserSkillsAreSwitchedOnToolsAndLoadedByTheAgent(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	u := newTreeUIWith(t, testenv.Options{DefaultModel: "toolie", Agent: agent.Config{DataDir: data}})
	ctx := context.Background()
	owner, err := u.app.Store.UserByEmail(ctx, "tree@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := u.app.Store.DefaultWorkspace(ctx, owner.ID)
	if err != nil {
		t.Fatal(err)
	}
	putSkill(t, filepath.Join(u.app.Agent.Root(ws), agent.WorkspaceSkillsDir), "deploy", "---\ndescription: Deploy the site.\n---\nDEPLOY-STEPS: build, then upload.\n")
	putSkill(t, filepath.Join(data, "skills"), "shared", "---\ndescription: For every workspace.\n---\nSHARED-STEPS\n")

	rowOf := func(name string) string { return `[data-testid=skill-row][data-skill=` + name + `]` }
	checked := func(name string) bool {
		return u.yes(`document.querySelector('` + rowOf(name) + ` input[type=checkbox]').checked`)
	}
	u.open("/tools", `document.querySelector('`+rowOf("shared")+`')`)
	if got := u.str(`document.querySelector('` + rowOf("shared") + ` [data-testid=skill-origin]').textContent.trim()`); got != "instance" {
		t.Errorf("shared comes from %q, want instance", got)
	}
	if got := u.str(`document.querySelector('` + rowOf("deploy") + ` [data-testid=skill-origin]').textContent.trim()`); got != "workspace" {
		t.Errorf("deploy comes from %q, want workspace", got)
	}
	u.do("switch shared off", click(rowOf("shared")+` input[type=checkbox]`))
	u.act("save", click(`[data-testid=tool-settings-save]`), `document.querySelector('[data-testid=flash]')`)
	if shared, deploy := checked("shared"), checked("deploy"); shared || !deploy {
		t.Fatalf("after saving: shared is on %v, deploy is on %v", shared, deploy)
	}

	u.open("/", `document.querySelector('`+trComposer+`')`)
	u.act("ask the agent to deploy", chromedp.Steps(
		click(`[data-testid=composer] input[name=agent]`),
		setValue(trComposer, `Deploy it [[tool:use_skill {"name":"deploy"}]]`),
		click(`[data-testid=send]`),
	), `location.pathname.startsWith("/t/") && `+trLast+`?.dataset.status === "complete"`)
	if !u.yes(`document.querySelector('[data-testid=tool-call][data-tool=use_skill][data-status=ok]')`) {
		t.Errorf("no successful use_skill card in the trace")
	}
	if got := u.str(trText(trLast)); !strings.Contains(got, "DEPLOY-STEPS") {
		t.Errorf("the answer does not show the loaded skill: %q", got)
	}
}
