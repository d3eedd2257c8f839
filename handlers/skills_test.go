package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/agent"
	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
)

// Markers of the execution context: its first sentence, and the skills
// list's.
const (
	ctxMarker    = "You are working as an agent in the workspace folder"
	skillsMarker = "Skills are instructions for particular tasks"
)

func putSkill(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, "SKILL.md"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// agentRequests are the streamed model requests with tools (the agent's),
// from the from-th request on.
func agentRequests(f *fakeollama.Server, from int) []*api.ChatRequest {
	var out []*api.ChatRequest
	for _, r := range trStreamed(f)[from:] {
		if len(r.Chat.Tools) > 0 {
			out = append(out, r.Chat)
		}
	}
	return out
}

// systemOf is a request's one system message; it fails unless there is
// exactly one, and unless the execution context is in it once and nowhere
// else in the request.
func systemOf(t *testing.T, i int, req *api.ChatRequest) string {
	t.Helper()
	var sys []string
	for _, m := range req.Messages {
		if m.Role == db.RoleSystem {
			sys = append(sys, m.Content)
		}
	}
	if len(sys) != 1 {
		t.Fatalf("request %d has %d system messages", i, len(sys))
	}
	for _, marker := range []string{ctxMarker, skillsMarker} {
		n := 0
		for _, m := range req.Messages {
			n += strings.Count(m.Content, marker)
		}
		if n != 1 || strings.Count(sys[0], marker) != 1 {
			t.Errorf("request %d carries %q %d times (%d in its system message), want once", i, marker, n, strings.Count(sys[0], marker))
		}
	}
	return sys[0]
}

func skillRow(page, name string) string {
	start := strings.Index(page, `<tr data-testid="skill-row" data-skill="`+name+`"`)
	if start < 0 {
		return ""
	}
	end := strings.Index(page[start:], "</tr>")
	return page[start : start+end]
}

func TestTheAgentSeesSkillsByNameAndLoadsOneOnDemand(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	e := newAgentEnv(t, testenv.Options{Agent: agent.Config{DataDir: data}})
	wsk := filepath.Join(e.root, agent.WorkspaceSkillsDir)
	putSkill(t, wsk, "release-notes", "---\nname: release-notes\ndescription: Write release notes from the changelog.\n---\n"+
		"RELEASE-BODY: read CHANGELOG.md, group by kind.\n")
	if err := os.WriteFile(filepath.Join(wsk, "release-notes", "template.md"), []byte("TEMPLATE-TEXT"), 0o600); err != nil {
		t.Fatal(err)
	}
	putSkill(t, filepath.Join(data, "skills"), "house-style", "---\ndescription: \"The instance's house style.\"\n---\nSTYLE-BODY\n")
	putSkill(t, wsk, "broken", "no front matter")

	thread := e.start(`Notes please [[tool:use_skill {"name":"release-notes"}]] [[tool@1:use_skill {"name":"release-notes","file":"template.md"}]]`)
	run, m := e.finished(thread)
	if run.Status != db.RunCompleted || !strings.Contains(m.Content, "TEMPLATE-TEXT") {
		t.Fatalf("run %s (%s) %q: %s", run.Status, run.Error, m.Content, e.describe(run.ID))
	}
	reqs := agentRequests(e.app.Fake, 0)
	if len(reqs) != 3 {
		t.Fatalf("%d agent requests, want 3", len(reqs))
	}
	sys := systemOf(t, 0, reqs[0])
	for _, want := range []string{"- release-notes: Write release notes from the changelog.", "- house-style: The instance's house style."} {
		if !strings.Contains(sys, want) {
			t.Errorf("the system message lacks %q:\n%s", want, sys)
		}
	}
	if strings.Contains(sys, "RELEASE-BODY") || strings.Contains(sys, "broken") {
		t.Errorf("the system message holds a body or an invalid skill:\n%s", sys)
	}
	var loaded string
	for _, msg := range reqs[1].Messages {
		if msg.Role == "tool" {
			loaded = msg.Content
		}
	}
	if !strings.Contains(loaded, "RELEASE-BODY") || !strings.Contains(loaded, "template.md") {
		t.Errorf("use_skill gave the model %q", loaded)
	}

	// Switched off on /tools: no longer listed, and use_skill refuses it.
	r := e.c.Post("/tools", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "max_steps": {"25"},
		"skill": {"release-notes", "house-style"}, "skill_on_release-notes": {"on"}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d %s", r.StatusCode, r.Body)
	}
	before := len(trStreamed(e.app.Fake))
	thread = e.start(`Style [[tool:use_skill {"name":"house-style"}]]`)
	run, m = e.finished(thread)
	if got := strings.Join(e.calls(run.ID), " "); got != "use_skill:error" {
		t.Errorf("calls = %s, want the disabled skill refused", got)
	}
	if !strings.Contains(m.Content, `the skill "house-style" is disabled`) || strings.Contains(m.Content, "STYLE-BODY") {
		t.Errorf("the model was told %q", m.Content)
	}
	reqs = agentRequests(e.app.Fake, before)
	if len(reqs) == 0 {
		t.Fatal("no agent request after the switch")
	}
	if sys := systemOf(t, 0, reqs[0]); strings.Contains(sys, "house-style") || !strings.Contains(sys, "- release-notes:") {
		t.Errorf("after switching house-style off the list is:\n%s", sys)
	}
}

func TestTheToolsPageListsSkillsWithTheirOriginAndSwitchesThem(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	e := newAgentEnv(t, testenv.Options{Agent: agent.Config{DataDir: data}})
	wsk := filepath.Join(e.root, agent.WorkspaceSkillsDir)
	putSkill(t, wsk, "mine", "---\ndescription: A workspace skill.\n---\nbody")
	putSkill(t, wsk, "shadow", "---\ndescription: The workspace's version.\n---\nbody")
	putSkill(t, wsk, "nodesc", "---\nname: nodesc\n---\nbody")
	putSkill(t, filepath.Join(data, "skills"), "shadow", "---\ndescription: The instance's version.\n---\nbody")
	putSkill(t, filepath.Join(data, "skills"), "shared", "---\ndescription: <b>For everyone</b>\n---\nbody")

	page := e.c.Get("/tools").Body
	if row := skillRow(page, "mine"); !strings.Contains(row, "A workspace skill.") || !strings.Contains(row, "workspace") ||
		!strings.Contains(row, `name="skill_on_mine" value="on" checked`) {
		t.Errorf("mine's row: %s", row)
	}
	if row := skillRow(page, "shadow"); !strings.Contains(row, "The workspace&#39;s version.") || !strings.Contains(row, "replaces the instance skill") {
		t.Errorf("shadow's row: %s", row)
	}
	if row := skillRow(page, "shared"); !strings.Contains(row, "&lt;b&gt;For everyone&lt;/b&gt;") || !strings.Contains(row, "instance") {
		t.Errorf("shared's row (its description must be escaped): %s", row)
	}
	if row := skillRow(page, "nodesc"); !strings.Contains(row, `data-testid="skill-error"`) || !strings.Contains(row, "no description") ||
		strings.Contains(row, "checkbox") {
		t.Errorf("an invalid skill must say why and have no switch: %s", row)
	}
	if !strings.Contains(page, `data-tool="use_skill"`) {
		t.Errorf("use_skill is not among the tools")
	}

	r := e.c.Post("/tools", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "max_steps": {"25"},
		"skill": {"mine", "shared", "forged", "../x"}, "skill_on_shared": {"on"}, "skill_on_forged": {"on"}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d %s", r.StatusCode, r.Body)
	}
	rules, err := e.app.Store.ToolPolicies(context.Background(), e.user.ID, e.ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := rules["skill:mine"]; !ok || p.Enabled {
		t.Errorf("mine was not switched off: %+v", rules)
	}
	if p, ok := rules["skill:shared"]; !ok || !p.Enabled {
		t.Errorf("shared was not kept on: %+v", rules)
	}
	for name := range rules {
		if name == "skill:forged" || name == "skill:../x" || name == "skill:shadow" {
			t.Errorf("a rule for a skill the form did not switch: %s", name)
		}
	}
	page = e.c.Get("/tools").Body
	if row := skillRow(page, "mine"); strings.Contains(row, "checked") || row == "" {
		t.Errorf("after switching it off mine's row is %s", row)
	}
	if row := skillRow(page, "shared"); !strings.Contains(row, "checked") {
		t.Errorf("shared's row is %s", row)
	}
}

func TestTheExecutionContextIsSentOnceAndNeverStoredAcrossResumeAndCompaction(t *testing.T) {
	t.Parallel()
	first, second := restartPair(t, "context-once@example.com", testenv.Options{})
	wsk := filepath.Join(first.root, agent.WorkspaceSkillsDir)
	putSkill(t, wsk, "alpha", "---\ndescription: ALPHA-DESC\n---\nALPHA-BODY\n")
	thread := first.start(`Go [[tool:use_skill {"name":"alpha"}]] [[tool@1:write_file {"path":"out.txt","content":"x"}]]`)
	ap := first.pending(thread, db.StepApproval)
	// A skill added while the run waits is in the requests after its resume.
	putSkill(t, wsk, "beta", "---\ndescription: BETA-DESC\n---\nBETA-BODY\n")
	before := len(trStreamed(first.app.Fake))
	first.shutdown(5 * time.Second)

	next := second(true)
	if r := next.c.Post(fmt.Sprintf("/steps/%d/decide", ap.ID), url.Values{"decision": {"once"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("decide: %d", r.StatusCode)
	}
	run, _ := next.finished(thread)
	if run.Status != db.RunCompleted {
		t.Fatalf("run %s (%s): %s", run.Status, run.Error, next.describe(run.ID))
	}
	all := agentRequests(next.app.Fake, 0)
	resumed := agentRequests(next.app.Fake, before)
	if len(all) != 3 || len(resumed) != 1 {
		t.Fatalf("%d agent requests, %d after the restart; want 3 and 1", len(all), len(resumed))
	}
	for i, req := range all {
		sys := systemOf(t, i, req)
		if !strings.Contains(sys, "- alpha: ALPHA-DESC") {
			t.Errorf("request %d lacks alpha:\n%s", i, sys)
		}
		if hasBeta := strings.Contains(sys, "- beta: BETA-DESC"); hasBeta != (i == 2) {
			t.Errorf("request %d lists beta: %v (only the resumed one, assembled after it was added, should)", i, hasBeta)
		}
	}

	// Neither the checkpoint, the steps nor the messages keep it.
	ctx := context.Background()
	stored := func(what, query string, args ...any) {
		t.Helper()
		var n int
		if err := next.app.Store.Pool.QueryRow(ctx, query, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d %s hold the execution context", n, what)
		}
	}
	like := func(col string) string {
		return fmt.Sprintf("(%[1]s LIKE '%%%[2]s%%' OR %[1]s LIKE '%%%[3]s%%' OR %[1]s LIKE '%%- alpha: ALPHA-DESC%%')", col, ctxMarker, skillsMarker)
	}
	stored("checkpoints", "SELECT count(*) FROM runs WHERE thread_id = $1 AND "+like("checkpoint::text"), thread)
	stored("steps", "SELECT count(*) FROM run_steps s JOIN runs r ON r.id = s.run_id WHERE r.thread_id = $1 AND "+like("s.data::text"), thread)

	// A second turn, then the older turn is summarized: the summary is made
	// from the stored turns, so it cannot hold the context either, and the
	// next run's requests carry the summary once and the context once.
	next.send(thread, "Thanks")
	next.finished(thread)
	if _, err := next.app.RT.Compact(ctx, next.user.ID, thread); err != nil {
		t.Fatalf("compact: %v", err)
	}
	for _, r := range next.app.Fake.Requests() {
		if r.Chat == nil || r.Chat.Stream == nil || *r.Chat.Stream {
			continue
		}
		for _, m := range r.Chat.Messages {
			if m.Role != db.RoleSystem && (strings.Contains(m.Content, ctxMarker) || strings.Contains(m.Content, skillsMarker)) {
				t.Errorf("a summary or title request was given the execution context: %.200q", m.Content)
			}
		}
	}
	stored("messages", "SELECT count(*) FROM messages WHERE thread_id = $1 AND "+like("content"), thread)
	before = len(trStreamed(next.app.Fake))
	next.send(thread, `Again [[tool:use_skill {"name":"beta"}]]`)
	if run, _ := next.finished(thread); run.Status != db.RunCompleted {
		t.Fatalf("the run after the summary: %s (%s)", run.Status, run.Error)
	}
	after := agentRequests(next.app.Fake, before)
	if len(after) != 2 {
		t.Fatalf("%d agent requests after the summary, want 2", len(after))
	}
	for i, req := range after {
		sys := systemOf(t, i, req)
		if strings.Count(sys, "Summary of the earlier part of this conversation") != 1 {
			t.Errorf("request %d after the summary does not carry it once:\n%s", i, sys)
		}
	}
	stored("messages", "SELECT count(*) FROM messages WHERE thread_id = $1 AND "+like("content"), thread)
	stored("checkpoints", "SELECT count(*) FROM runs WHERE thread_id = $1 AND "+like("checkpoint::text"), thread)
}

// The execution context is assembled for each model request, not once per
// run: a skill added and a rule changed while a run waits for an approval
// show in its very next request, in the same run on the same instance.
func TestTheExecutionContextIsAssembledForEveryModelRequestOfARun(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t, testenv.Options{})
	wsk := filepath.Join(e.root, agent.WorkspaceSkillsDir)
	putSkill(t, wsk, "first", "---\ndescription: The first skill.\n---\nFIRST\n")
	thread := e.start(`Write it [[tool:write_file {"path":"a.txt","content":"x"}]]`)
	ap := e.pending(thread, db.StepApproval)
	putSkill(t, wsk, "second", "---\ndescription: Added while the run waited.\n---\nSECOND\n")
	e.allow("search_files", agent.ModeDeny)
	if r := e.c.Post(fmt.Sprintf("/steps/%d/decide", ap.ID), url.Values{"decision": {"once"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("decide: %d", r.StatusCode)
	}
	run, _ := e.finished(thread)
	if run.Status != db.RunCompleted {
		t.Fatalf("run %s: %s", run.Status, e.describe(run.ID))
	}
	reqs := agentRequests(e.app.Fake, 0)
	if len(reqs) != 2 {
		t.Fatalf("%d agent requests, want 2", len(reqs))
	}
	first, second := systemOf(t, 0, reqs[0]), systemOf(t, 1, reqs[1])
	if strings.Contains(first, "- second:") || !strings.Contains(second, "- second: Added while the run waited.") {
		t.Errorf("the skill added during the run is not in its next request:\nfirst:\n%s\nsecond:\n%s", first, second)
	}
	offered := func(req *api.ChatRequest, name string) bool {
		for _, tl := range req.Tools {
			if tl.Function.Name == name {
				return true
			}
		}
		return false
	}
	if !offered(reqs[0], "search_files") || offered(reqs[1], "search_files") {
		t.Errorf("search_files, denied during the run, must be offered in the first request only")
	}
	if !strings.Contains(second, "search_files (Denied by this workspace's rule.)") {
		t.Errorf("the second request's context does not say search_files is denied:\n%s", second)
	}
}
