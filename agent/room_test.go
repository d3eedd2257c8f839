package agent

import (
	"context"
	"strings"
	"testing"

	"weft/db"
)

func TestARoomAgentsPolicyNarrowsToolsAndNeverWidensThem(t *testing.T) {
	tools := []Tool{
		{Name: "read_file", Class: ClassRead}, {Name: "list_files", Class: ClassRead},
		{Name: "write_file", Class: ClassWrite}, {Name: "edit_file", Class: ClassWrite},
		{Name: "fetch_url", Class: ClassNetwork}, {Name: ToolAskUser, Class: ClassAsk},
		{Name: ToolRemember, Class: ClassRead}, {Name: ToolForget, Class: ClassRead},
	}
	room := &db.RoomProfile{Agent: db.RoomAgent{ToolPolicy: map[string]string{
		"read_file": ModeAsk, "write_file": ModeAuto, "edit_file": ModeDeny, "fetch_url": ModeAuto, ToolAskUser: ModeAsk,
	}}}
	var avail, thread []Availability
	for _, tl := range tools {
		avail = append(avail, Explain(tl, nil, false, "toolie", true, true))
		thread = append(thread, Explain(tl, nil, false, "toolie", true, true))
	}
	narrowRoom(avail, room)
	narrowRoom(thread, nil)
	want := map[string]string{ // available/asks, or the reason
		"read_file":  "asks", // auto in the workspace, ask for the agent
		"list_files": "runs", // no rule of the agent's
		"write_file": "asks", // the workspace asks: auto does not widen it
		"edit_file":  reasonRoomDenied,
		"fetch_url":  "Off by default", // off in the workspace stays off
		ToolAskUser:  "runs",           // a question is itself asking
		ToolRemember: reasonRoomMemory,
		ToolForget:   reasonRoomMemory,
	}
	for i, av := range avail {
		got := av.Reason
		switch {
		case av.Available && av.Asks:
			got = "asks"
		case av.Available:
			got = "runs"
		}
		if !strings.HasPrefix(got, want[av.Tool.Name]) {
			t.Errorf("%s in a room: %q, want %q", av.Tool.Name, got, want[av.Tool.Name])
		}
		if th, ex := thread[i], Explain(tools[i], nil, false, "toolie", true, true); th.Available != ex.Available || th.Asks != ex.Asks || th.Reason != ex.Reason {
			t.Errorf("%s in a thread was changed: %+v", av.Tool.Name, thread[i])
		}
	}
}

func TestARoomAgentsPolicyHidesTheSkillsItDenies(t *testing.T) {
	root := t.TempDir()
	inst := t.TempDir()
	writeSkill(t, inst, "deploy", "---\ndescription: Deploys things.\n---\nBODY\n")
	writeSkill(t, inst, "review", "---\ndescription: Reviews things.\n---\nBODY\n")
	s := NewSkills(inst, nil)
	ctx := context.Background()

	room := &Env{Root: root, Narrow: map[string]string{SkillRule("deploy"): ModeDeny}}
	if p := s.Prompt(ctx, room); strings.Contains(p, "deploy") || !strings.Contains(p, "review") {
		t.Fatalf("the room agent's skills list: %q", p)
	}
	if _, err := s.run(ctx, room, Args{"name": "deploy"}); err == nil {
		t.Fatal("a denied skill was loaded")
	}
	if _, err := s.run(ctx, room, Args{"name": "review"}); err != nil {
		t.Fatalf("an allowed skill: %v", err)
	}
	if p := s.Prompt(ctx, &Env{Root: root}); !strings.Contains(p, "deploy") {
		t.Fatalf("a thread's skills list: %q", p)
	}
	if p := s.Prompt(ctx, &Env{Root: root, Narrow: map[string]string{ToolUseSkill: ModeDeny}}); p != "" {
		t.Fatalf("use_skill denied, the list is still given: %q", p)
	}
}
