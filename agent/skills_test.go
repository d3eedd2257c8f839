package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"weft/db"
)

func TestSkillFrontMatterIsReadFromTheTopOfSKILLmd(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in        string
		wantName, wantD string
		wantBody        string
		wantErr         string
	}{
		{name: "plain", in: "---\nname: pdf\ndescription: Fill PDF forms.\n---\nStep 1.\n",
			wantName: "pdf", wantD: "Fill PDF forms.", wantBody: "Step 1.\n"},
		{name: "quoted, CRLF and a BOM", in: "\uFEFF---\r\nname: \"pdf\"\r\ndescription: 'It''s for: forms # not a comment'\r\n---\r\nBody",
			wantName: "pdf", wantD: "It's for: forms # not a comment", wantBody: "Body"},
		{name: "double-quoted escapes", in: "---\ndescription: \"a \\\"b\\\" c\"\n---\n", wantD: `a "b" c`},
		{name: "folded block", in: "---\ndescription: >\n  Reads logs\n  and reports.\nlicense: MIT\n---\nx", wantD: "Reads logs and reports.", wantBody: "x"},
		{name: "literal block", in: "---\ndescription: |-\n  one\n  two\n---\n", wantD: "one\ntwo"},
		{name: "plain value continued", in: "---\ndescription: starts here\n  and goes on\n---\n", wantD: "starts here and goes on"},
		{name: "other keys and nested maps ignored", in: "---\nmetadata:\n  name: inner\n  description: inner\ndescription: outer # comment\n---\n",
			wantD: "outer"},
		{name: "no front matter", in: "# Just a heading\nname: x\n", wantErr: "does not start with a front matter block"},
		{name: "unclosed", in: "---\nname: x\ndescription: y\n", wantErr: "not closed"},
		{name: "not key value", in: "---\njust words\n---\n", wantErr: "not key: value"},
		{name: "twice", in: "---\nname: a\nname: b\n---\n", wantErr: "gives name twice"},
		{name: "open quote", in: "---\ndescription: \"never closed\n---\n", wantErr: "not closed on the same line"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fm, body, err := parseSkill([]byte(c.in))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fm.name != c.wantName || fm.description != c.wantD || body != c.wantBody {
				t.Fatalf("got name %q description %q body %q", fm.name, fm.description, body)
			}
		})
	}
}

// skillRules are a workspace's rules kept in memory (the database's are
// used by the end-to-end tests in handlers).
type skillRules map[string]db.ToolPolicy

func (r skillRules) ToolPolicies(context.Context, int64, int64) (map[string]db.ToolPolicy, error) {
	return r, nil
}

func writeSkill(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, "SKILL.md"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestHostileSkillsAreListedWithWhyAndNeverLeaveTheirFolder(t *testing.T) {
	t.Parallel()
	root, inst, outside := t.TempDir(), t.TempDir(), t.TempDir()
	wsk := filepath.Join(root, WorkspaceSkillsDir)
	if err := os.WriteFile(filepath.Join(outside, "secret.md"), []byte("---\nname: leak\ndescription: SECRET-OUTSIDE\n---\nSECRET-OUTSIDE body"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "private.txt"), []byte("WORKSPACE-PRIVATE"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, wsk, "good", "---\ndescription: Does good things.\n---\nGOOD BODY\n")
	if err := os.WriteFile(filepath.Join(wsk, "good", "notes.txt"), []byte("GOOD NOTES"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(wsk, "good", "leak.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../private.txt", filepath.Join(wsk, "good", "up.txt")); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, wsk, "huge", "---\ndescription: big\n---\n"+strings.Repeat("x", maxSkillBytes))
	writeSkill(t, wsk, "bare", "No front matter at all.")
	writeSkill(t, wsk, "misnamed", "---\nname: other\ndescription: d\n---\n")
	writeSkill(t, wsk, "nodesc", "---\nname: nodesc\n---\n")
	writeSkill(t, wsk, "binary", "---\ndescription: d\n---\n\x00\x01")
	writeSkill(t, wsk, "long", "---\ndescription: "+strings.Repeat("word ", 300)+"\n---\n")
	// A SKILL.md that is a link out of its folder, and a skill folder that
	// is a link out of the workspace.
	if err := os.MkdirAll(filepath.Join(wsk, "linked"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(wsk, "linked", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(wsk, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(wsk, "bad name!"), 0o750); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, inst, "good", "---\ndescription: The instance's version.\n---\nINSTANCE BODY\n")
	writeSkill(t, inst, "shared", "---\nname: shared\ndescription: For everyone.\n---\nSHARED BODY\n")
	writeSkill(t, inst, "off", "---\ndescription: Switched off here.\n---\nOFF BODY\n")

	s := NewSkills(inst, skillRules{SkillRule("off"): {Tool: SkillRule("off"), Enabled: false, Mode: ModeAuto}})
	env := &Env{Root: root, User: 1, Workspace: 1}
	list, err := s.List(context.Background(), 1, 1, root)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Skill{}
	for _, sk := range list {
		by[sk.Name] = sk
	}
	want := map[string]string{ // name → a part of its problem ("" valid)
		"good": "", "shared": "", "off": "", "long": "",
		"huge":      "over the 256 KiB limit",
		"bare":      "does not start with a front matter block",
		"misnamed":  `names it "other", but its folder is "misnamed"`,
		"nodesc":    "no description",
		"binary":    "not a text file",
		"linked":    "leads outside the skill's folder",
		"escape":    "symbolic link",
		"bad name!": "not a skill name",
	}
	if len(by) != len(want) {
		t.Errorf("listed %d skills, want %d: %+v", len(by), len(want), list)
	}
	for name, problem := range want {
		sk, ok := by[name]
		switch {
		case !ok:
			t.Errorf("%s is not listed", name)
		case problem == "" && sk.Problem != "":
			t.Errorf("%s: unexpected problem %q", name, sk.Problem)
		case problem != "" && !strings.Contains(sk.Problem, problem):
			t.Errorf("%s: problem %q, want %q", name, sk.Problem, problem)
		}
	}
	if g := by["good"]; g.Origin != SkillWorkspace || !g.Overrides || g.Description != "Does good things." {
		t.Errorf("the workspace's good must replace the instance's: %+v", g)
	}
	if sh := by["shared"]; sh.Origin != SkillInstance || !sh.Enabled {
		t.Errorf("shared: %+v", sh)
	}
	if by["off"].Enabled || !by["good"].Enabled {
		t.Errorf("switches: off %v, good %v", by["off"].Enabled, by["good"].Enabled)
	}
	if d := by["long"].Description; len(d) > maxSkillDescBytes || !strings.HasSuffix(d, "…") {
		t.Errorf("a long description is not clipped: %d bytes", len(d))
	}

	prompt := s.Prompt(context.Background(), env)
	for _, in := range []string{"- good: Does good things.", "- shared: For everyone.", "use_skill"} {
		if !strings.Contains(prompt, in) {
			t.Errorf("the prompt lacks %q:\n%s", in, prompt)
		}
	}
	for _, out := range []string{"- off:", "- huge:", "- bare:", "- linked:", "SECRET", "GOOD BODY", "instance's version"} {
		if strings.Contains(prompt, out) {
			t.Errorf("the prompt shows %q:\n%s", out, prompt)
		}
	}

	use := func(args Args) (string, error) {
		res, err := s.run(context.Background(), env, args)
		return res.Output, err
	}
	out, err := use(Args{"name": "good"})
	if err != nil || !strings.Contains(out, "GOOD BODY") || !strings.Contains(out, "notes.txt") || strings.Contains(out, "INSTANCE") {
		t.Errorf("use_skill good = %q, %v", out, err)
	}
	if out, err := use(Args{"name": "shared"}); err != nil || !strings.Contains(out, "SHARED BODY") {
		t.Errorf("use_skill shared = %q, %v", out, err)
	}
	if out, err := use(Args{"name": "good", "file": "notes.txt"}); err != nil || !strings.Contains(out, "GOOD NOTES") {
		t.Errorf("use_skill good notes.txt = %q, %v", out, err)
	}
	refusals := []struct {
		args Args
		want string
	}{
		{Args{"name": "off"}, "disabled in this workspace"},
		{Args{"name": "nope"}, "no skill named"},
		{Args{"name": "../good"}, "no skill named"},
		{Args{"name": "huge"}, "over the 256 KiB limit"},
		{Args{"name": "linked"}, "cannot be used"},
		{Args{"name": "escape"}, "symbolic link"},
		{Args{"name": "good", "file": "../huge/SKILL.md"}, "inside the skill's folder"},
		{Args{"name": "good", "file": "/etc/passwd"}, "inside the skill's folder"},
		{Args{"name": "good", "file": "leak.txt"}, "leads outside the skill's folder"},
		{Args{"name": "good", "file": "up.txt"}, "leads outside the skill's folder"},
		{Args{"name": "good", "file": "."}, "not its folder"},
	}
	for _, r := range refusals {
		out, err := use(r.args)
		var te *ToolError
		if !errors.As(err, &te) || !strings.Contains(te.Msg, r.want) {
			t.Errorf("use_skill %v = %q, %v; want a tool error with %q", r.args, out, err, r.want)
			continue
		}
		if strings.Contains(te.Msg, "SECRET") || strings.Contains(te.Msg, "WORKSPACE-PRIVATE") || strings.Contains(te.Msg, root) {
			t.Errorf("use_skill %v leaks: %q", r.args, te.Msg)
		}
		if r.want == "no skill named" && !strings.Contains(te.Msg, "Available skills: good, long, shared.") {
			t.Errorf("an unknown skill's refusal does not list the available ones: %q", te.Msg)
		}
	}

	// use_skill switched off in the workspace: no list at all.
	off := NewSkills(inst, skillRules{ToolUseSkill: {Tool: ToolUseSkill, Enabled: false, Mode: ModeAuto}})
	if p := off.Prompt(context.Background(), env); p != "" {
		t.Errorf("with use_skill disabled the prompt still lists skills:\n%s", p)
	}
	// No skills anywhere: no text.
	if p := NewSkills("", nil).Prompt(context.Background(), &Env{Root: t.TempDir()}); p != "" {
		t.Errorf("without skills the prompt says %q", p)
	}
}

func TestAtMostAHundredSkillsAreListed(t *testing.T) {
	t.Parallel()
	inst := t.TempDir()
	for i := range maxSkills + 20 {
		writeSkill(t, inst, fmt.Sprintf("s%03d", i), "---\ndescription: d\n---\n")
	}
	list, err := NewSkills(inst, nil).List(context.Background(), 1, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != maxSkills || list[0].Name != "s000" || list[maxSkills-1].Name != "s099" {
		t.Fatalf("listed %d skills, %s…%s", len(list), list[0].Name, list[len(list)-1].Name)
	}
}

// Descriptions past the prompt's budget for them are left out, their
// skills named only: a hundred long descriptions would fill a small local
// model's window before the user's question.
func TestSkillsPastTheDescriptionBudgetAreNamedOnly(t *testing.T) {
	t.Parallel()
	inst := t.TempDir()
	long := strings.Repeat("word ", maxSkillDescBytes/5)
	for i := range 40 {
		writeSkill(t, inst, fmt.Sprintf("s%02d", i), "---\ndescription: "+long+"\n---\nbody\n")
	}
	p := NewSkills(inst, nil).Prompt(context.Background(), &Env{Root: t.TempDir(), User: 1, Workspace: 1})
	described := strings.Count(p, ": word word")
	if described == 0 || described >= 40 {
		t.Fatalf("%d of 40 skills described", described)
	}
	if len(p) > maxSkillListBytes+2048 {
		t.Errorf("the skills list is %d bytes, over its budget of %d", len(p), maxSkillListBytes)
	}
	if !strings.Contains(p, "- More skills (names only): s"+fmt.Sprintf("%02d", described)+", ") || !strings.Contains(p, "s39\n") {
		t.Errorf("the skills past the budget are not named:\n%s", p[len(p)-300:])
	}
}

// The skills list is assembled for every model request, from what each
// SKILL.md is read to say once per version of the file: an edit in place
// and a file replaced by another (as editors save) show at once.
func TestTheSkillsListShowsEachChangeOfASkillAtOnce(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	wsk := filepath.Join(root, filepath.FromSlash(WorkspaceSkillsDir))
	s := NewSkills("", nil)
	env := &Env{Root: root}
	want := func(line string) {
		t.Helper()
		if p := s.Prompt(context.Background(), env); !strings.Contains(p, line) {
			t.Errorf("the list does not say %q:\n%s", line, p)
		}
	}
	writeSkill(t, wsk, "tidy", "---\ndescription: First version.\n---\nBody.\n")
	want("- tidy: First version.")
	want("- tidy: First version.")
	writeSkill(t, wsk, "tidy", "---\ndescription: Edited in place, longer.\n---\nBody.\n")
	want("- tidy: Edited in place, longer.")
	// Same size, another file renamed over it.
	tmp := filepath.Join(wsk, "tidy", "SKILL.md.new")
	if err := os.WriteFile(tmp, []byte("---\ndescription: Replaced by rename, longer.\n---\nBody.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(wsk, "tidy", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	want("- tidy: Replaced by rename, longer.")
	writeSkill(t, wsk, "tidy", "no front matter")
	if p := s.Prompt(context.Background(), env); strings.Contains(p, "tidy") {
		t.Errorf("a skill broken since is still listed:\n%s", p)
	}
}

// The cost of the skills list, assembled for every model request of a run:
// 100 skills of 250 KiB.
func BenchmarkSkillsPromptOf100LargeSkills(b *testing.B) {
	root := b.TempDir()
	wsk := filepath.Join(root, filepath.FromSlash(WorkspaceSkillsDir))
	body := strings.Repeat("a step of the procedure\n", (250<<10)/24)
	for i := range 100 {
		d := filepath.Join(wsk, fmt.Sprintf("s%03d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "SKILL.md"), []byte(fmt.Sprintf("---\ndescription: Skill %d.\n---\n%s", i, body)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	s, env := NewSkills("", nil), &Env{Root: root}
	for b.Loop() {
		if s.Prompt(context.Background(), env) == "" {
			b.Fatal("no skills listed")
		}
	}
}
