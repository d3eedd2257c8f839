package chat_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"weft/chat"
	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testwait"
)

func ptrTo[T any](v T) *T { return &v }

// conversation stores a finished exchange per content in a new thread and
// returns the thread with its last answer.
func (e *env) conversation(contents ...string) (db.Thread, db.Message) {
	e.t.Helper()
	var thread int64
	var last db.Message
	for _, c := range contents {
		sent := e.send(thread, c)
		thread = sent.Thread.ID
		_, last = e.wait(sent)
	}
	t, err := e.store.Thread(context.Background(), e.user.ID, thread)
	if err != nil {
		e.t.Fatal(err)
	}
	return t, last
}

func roles(msgs []api.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role + ": " + m.Content
	}
	return out
}

func TestTheAssemblerPutsEveryPartInItsFixedOrderAndLeavesOutWhatIsEmpty(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	ctx := context.Background()
	th, answer := e.conversation("first question")
	role, err := e.store.CreateRole(ctx, e.user.ID, db.RoleInput{Name: "Pirate", Prompt: "Talk like a pirate."})
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name                        string
		system, instructions, notes string
		role                        bool
		summary                     bool
		routeContext                string
		wantSystem                  []string // the parts, in order ("" : no system message)
	}{
		{name: "nothing but the conversation", wantSystem: nil},
		{name: "instance prompt only", system: "You are Weft.", wantSystem: []string{"You are Weft."}},
		{
			name: "every part", system: "You are Weft.", instructions: "I am a chemist.", role: true,
			notes: "Use SI units.", summary: true, routeContext: "Sources:\n[1] a passage",
			wantSystem: []string{"You are Weft.", "I am a chemist.", "Talk like a pirate.",
				"Notes from the user for this conversation:\nUse SI units.",
				"Summary of the earlier part of this conversation (those messages are not repeated below):\nSUMMARY",
				"Sources:\n[1] a passage"},
		},
		{
			name: "role and notes without the instance parts", role: true, notes: "Be brief.",
			wantSystem: []string{"Talk like a pirate.", "Notes from the user for this conversation:\nBe brief."},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := e.store.SetSetting(ctx, db.SettingSystemPrompt, tc.system); err != nil {
				t.Fatal(err)
			}
			if err := e.store.SetInstructions(ctx, e.user.ID, tc.instructions); err != nil {
				t.Fatal(err)
			}
			s := db.ThreadSettings{Notes: tc.notes, Compaction: true}
			if tc.role {
				s.RoleID = &role.ID
			}
			if err := e.store.UpdateThreadSettings(ctx, e.user.ID, th.ID, s); err != nil {
				t.Fatal(err)
			}
			mustExec(t, e.store, "DELETE FROM messages WHERE role = 'system'")
			// A summary under the first question covers it; the question being
			// answered is the one after it.
			next := e.send(th.ID, "second question")
			e.wait(next)
			if tc.summary {
				if _, err := e.store.AddCompaction(ctx, e.user.ID, answer.ID, "SUMMARY", db.MessageMeta{Compaction: &db.Compaction{Covers: 2}}); err != nil {
					t.Fatal(err)
				}
			}
			a, err := e.rt.Assemble(ctx, chat.ContextRequest{User: e.user.ID, Thread: th.ID, Leaf: next.User.ID, RouteContext: tc.routeContext})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			turns := a.Messages
			if len(turns) > 0 && turns[0].Role == "system" {
				got = strings.Split(turns[0].Content, "\n\n")
				turns = turns[1:]
			}
			if !slices.Equal(got, tc.wantSystem) {
				t.Errorf("system parts =\n%q\nwant\n%q", got, tc.wantSystem)
			}
			wantTurns := []string{"user: first question", "assistant: You said: first question", "user: second question"}
			if tc.summary {
				wantTurns = wantTurns[2:] // the summary replaces what it covers
			}
			if !slices.Equal(roles(turns), wantTurns) {
				t.Errorf("turns = %q, want %q", roles(turns), wantTurns)
			}
			for _, m := range a.Messages[1:] {
				if m.Role == "system" {
					t.Errorf("a second system message was sent: %q", m.Content)
				}
			}
			// Nothing of the assembly is stored as a visible message.
			path, _, err := e.store.ActivePath(ctx, e.user.ID, th.ID, 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range path {
				if m.Role == "system" {
					t.Errorf("a system message is on the visible path: %q", m.Content)
				}
			}
			// Go back to one exchange for the next case.
			if _, err := e.store.DeleteMessage(ctx, e.user.ID, next.User.ID); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestTheAssemblerSendsOnlyTheActiveBranchAndSkipsEmptyAnswersAndOtherUsersThreads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	ctx := context.Background()
	th, first := e.conversation("one", "two")
	// A second version of "two" (a branch), then a stopped empty answer on it.
	two := e.message(*first.ParentID)
	edited, err := e.rt.Edit(ctx, e.user.ID, two.ID, "two, edited")
	if err != nil {
		t.Fatal(err)
	}
	e.wait(edited)
	mustExec(t, e.store, "UPDATE messages SET content = '' WHERE id = $1", edited.Assistant.ID)
	third := e.send(th.ID, "three")
	e.wait(third)

	a, err := e.rt.Assemble(ctx, chat.ContextRequest{User: e.user.ID, Thread: th.ID, Leaf: third.User.ID})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user: one", "assistant: You said: one", "user: two, edited", "user: three"}
	if !slices.Equal(roles(a.Messages), want) {
		t.Errorf("messages = %q, want %q (no other branch, no empty answer)", roles(a.Messages), want)
	}

	intruder, _ := e.newUser("intruder@example.com")
	if _, err := e.rt.Assemble(ctx, chat.ContextRequest{User: intruder.ID, Thread: th.ID, Leaf: third.User.ID}); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("another user's thread: err = %v, want ErrNotFound", err)
	}
}

func TestTheBudgetComesFromTheModelCappedByTheRoleAndTheThread(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{}, fakeollama.WithModels(fakeollama.Model{Name: "tiny", ContextLength: 4096}))
	ctx := context.Background()
	th, answer := e.conversation("hello")
	leaf := *answer.ParentID
	role, err := e.store.CreateRole(ctx, e.user.ID, db.RoleInput{Name: "Precise", Params: db.RoleParams{
		Temperature: ptrTo(0.1), TopP: ptrTo(0.5), TopK: ptrTo(20), RepeatPenalty: ptrTo(1.2), Seed: ptrTo(7),
		NumCtx: ptrTo(2048), NumPredict: ptrTo(300), Stop: []string{"END"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		role       bool
		threadCtx  int
		wantNumCtx int
		wantBudget int
	}{
		{"the model's window (under the instance cap)", false, 0, 4096, 4096 - 1024},
		{"the role's window, keeping num_predict for the answer", true, 0, 2048, 2048 - 300},
		{"the thread's window wins over the role's", true, 1024, 1024, 1024 - 300},
		{"never more than the model's window", false, 100_000, 4096, 4096 - 1024},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := db.ThreadSettings{NumCtx: tc.threadCtx, Compaction: true}
			if tc.role {
				s.RoleID = &role.ID
			}
			if err := e.store.UpdateThreadSettings(ctx, e.user.ID, th.ID, s); err != nil {
				t.Fatal(err)
			}
			a, err := e.rt.Assemble(ctx, chat.ContextRequest{User: e.user.ID, Thread: th.ID, Leaf: leaf})
			if err != nil {
				t.Fatal(err)
			}
			if a.NumCtx != tc.wantNumCtx || a.Options["num_ctx"] != tc.wantNumCtx {
				t.Errorf("num_ctx = %d (option %v), want %d", a.NumCtx, a.Options["num_ctx"], tc.wantNumCtx)
			}
			if a.Budget != tc.wantBudget {
				t.Errorf("budget = %d, want %d", a.Budget, tc.wantBudget)
			}
			if a.Window != 4096 {
				t.Errorf("window = %d, want 4096 from /api/show", a.Window)
			}
			if tc.role {
				want := map[string]any{"temperature": 0.1, "top_p": 0.5, "top_k": 20, "repeat_penalty": 1.2, "seed": 7,
					"num_predict": 300, "stop": []string{"END"}, "num_ctx": tc.wantNumCtx}
				for k, v := range want {
					if got := a.Options[k]; !equalOption(got, v) {
						t.Errorf("option %s = %v, want %v", k, got, v)
					}
				}
			} else if len(a.Options) != 1 {
				t.Errorf("options without a role = %v, want num_ctx only", a.Options)
			}
		})
	}

	// What the model server receives: the role's options and num_ctx.
	if err := e.store.UpdateThreadSettings(ctx, e.user.ID, th.ID, db.ThreadSettings{RoleID: &role.ID, Compaction: true}); err != nil {
		t.Fatal(err)
	}
	e.wait(e.send(th.ID, "again"))
	reqs := chatRequests(e.fake)
	last := reqs[len(reqs)-1]
	if last.NumCtx != 2048 || last.Chat.Options["temperature"] != 0.1 || last.Chat.Options["seed"] != float64(7) {
		t.Errorf("the fake saw num_ctx %d and options %v, want the role's", last.NumCtx, last.Chat.Options)
	}
	for i, r := range reqs {
		if r.NumCtx == 0 {
			t.Errorf("request %d was sent without num_ctx", i)
		}
	}
}

func equalOption(got, want any) bool {
	switch w := want.(type) {
	case []string:
		g, ok := got.([]string)
		return ok && slices.Equal(g, w)
	}
	return got == want
}

// long is a message of about n characters.
func long(word string, n int) string {
	return strings.TrimSpace(strings.Repeat(word+" ", n/(len(word)+1)))
}

func TestCompactionSummarizesOlderTurnsWhenTheNextSendWouldNotFit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{}, fakeollama.WithModels(fakeollama.Model{Name: "tiny", ContextLength: 1024}))
	ctx := context.Background()
	// num_ctx 1024 keeps 256 tokens for the answer: 768 for the prompt. Each
	// exchange is about 215 tokens, so the fifth question does not fit.
	words := []string{"alpha", "bravo", "charlie", "delta", "echo"}
	var thread int64
	var sent db.Sent
	for i, w := range words {
		sent = e.send(thread, long(w, 400))
		thread = sent.Thread.ID
		_, m := e.wait(sent)
		if m.Status != db.MsgComplete {
			t.Fatalf("answer %d: %s %s", i, m.Status, m.Error)
		}
	}
	var summaries, chats []fakeollama.Recorded
	for _, r := range e.fake.Requests() {
		if r.Chat == nil {
			continue
		}
		if r.Chat.Stream != nil && !*r.Chat.Stream && strings.Contains(r.Chat.Messages[0].Content, "summar") {
			if len(chats) != 4 {
				t.Errorf("a summary was requested after answer %d, want only before the fifth", len(chats))
			}
			summaries = append(summaries, r)
		} else if r.Chat.Stream == nil || *r.Chat.Stream {
			chats = append(chats, r)
		}
	}
	if len(summaries) == 0 {
		t.Fatalf("no summary was requested")
	}
	// The covered turns do not fit one summary request: they are summarized
	// in pieces, each merged into the summary of the ones before.
	for i, r := range summaries {
		if tokens := fakeollama.TokensOf(4, r.Chat.Messages); tokens > r.NumCtx {
			t.Errorf("summary request %d is %d tokens for num_ctx %d", i+1, tokens, r.NumCtx)
		}
		if i > 0 && !strings.HasPrefix(r.Chat.Messages[1].Content, "Earlier summary:\nSummary: ") {
			t.Errorf("summary request %d does not carry the summary so far: %.100q", i+1, r.Chat.Messages[1].Content)
		}
	}
	for i, r := range chats[:4] {
		if strings.Contains(r.Chat.Messages[0].Content, "Summary of the earlier part") {
			t.Errorf("request %d already carried a summary", i+1)
		}
	}
	// The summary request saw the oldest turns.
	sreq := summaries[0].Chat.Messages[1].Content
	if !strings.Contains(sreq, "User: alpha") || !strings.Contains(sreq, "Assistant: You said: alpha") {
		t.Errorf("the summary request does not hold the oldest turns: %.200q", sreq)
	}
	// The fifth request: the summary, then a tail that fits num_ctx.
	fifth := chats[4]
	if got := fifth.Chat.Messages[0]; got.Role != "system" || !strings.Contains(got.Content, "Summary: Conversation: User: alpha") {
		t.Errorf("the fifth request does not start with the summary: %.300q", got.Content)
	}
	tail := fifth.Chat.Messages[1:]
	if tail[len(tail)-1].Content != long("echo", 400) {
		t.Errorf("the question being answered is not last")
	}
	if tail[0].Role != "user" {
		t.Errorf("the kept tail starts with %s, want a whole exchange", tail[0].Role)
	}
	for _, m := range tail {
		if strings.HasPrefix(m.Content, "alpha") {
			t.Errorf("a summarized turn was sent again")
		}
	}
	if tokens := fakeollama.TokensOf(4, fifth.Chat.Messages); tokens > fifth.NumCtx || fifth.Truncated != 0 {
		t.Errorf("the fifth prompt is %d tokens for num_ctx %d (%d messages dropped by the server)", tokens, fifth.NumCtx, fifth.Truncated)
	}

	// The summary is a node of the tree under the last message it covers,
	// and the answer points to it; the originals are all still there.
	_, answer := e.wait(sent)
	var usage struct {
		CompactionID int64 `json:"compaction_id"`
	}
	if err := jsonUnmarshal(answer.Metadata.Raw, "usage", &usage); err != nil || usage.CompactionID == 0 {
		t.Fatalf("the answer does not record its summary: %s", answer.Metadata.Raw)
	}
	node := e.message(usage.CompactionID)
	if node.Role != "system" || node.ParentID == nil || !strings.HasPrefix(node.Content, "Summary: ") {
		t.Errorf("compaction node = %+v", node)
	}
	path, _, err := e.store.ActivePath(ctx, e.user.ID, thread, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(path) != 10 {
		t.Errorf("the visible path has %d messages, want all 10", len(path))
	}
	if !slices.ContainsFunc(path, func(m db.Message) bool { return m.ID == *node.ParentID }) {
		t.Errorf("the summary does not hang under a message of the path")
	}

	// Switching compaction off sends the full history again.
	if err := e.store.UpdateThreadSettings(ctx, e.user.ID, thread, db.ThreadSettings{Compaction: false}); err != nil {
		t.Fatal(err)
	}
	a, err := e.rt.Assemble(ctx, chat.ContextRequest{User: e.user.ID, Thread: thread, Leaf: sent.User.ID})
	if err != nil {
		t.Fatal(err)
	}
	if a.Summary != nil || len(a.Messages) != 9 || a.Messages[0].Content != long("alpha", 400) {
		t.Errorf("with compaction off: summary %v, %d messages, want the 9 originals", a.Summary != nil, len(a.Messages))
	}
}

func TestManualCompactionSummarizesAllButTheLatestExchange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	ctx := context.Background()
	th, _ := e.conversation("one")
	if _, err := e.rt.Compact(ctx, e.user.ID, th.ID); !errors.Is(err, chat.ErrNothingToCompact) {
		t.Errorf("one exchange: err = %v, want ErrNothingToCompact", err)
	}
	e.wait(e.send(th.ID, "two"))
	e.wait(e.send(th.ID, "three"))
	node, err := e.rt.Compact(ctx, e.user.ID, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Covers int  `json:"covers"`
		Auto   bool `json:"auto"`
	}
	if err := jsonUnmarshal(node.Metadata.Raw, "", &meta); err != nil || meta.Covers != 4 || meta.Auto {
		t.Errorf("summary metadata = %s, want covers 4, not automatic", node.Metadata.Raw)
	}
	sent := e.send(th.ID, "four")
	e.wait(sent)
	reqs := chatRequests(e.fake)
	got := roles(reqs[len(reqs)-1].Chat.Messages)
	want := []string{"user: three", "assistant: You said: three", "user: four"}
	if len(got) != 4 || !strings.HasPrefix(got[0], "system: Summary of the earlier part") || !slices.Equal(got[1:], want) {
		t.Errorf("after /compact the request is %q, want the summary then %q", got, want)
	}
	if err := e.store.UpdateThreadSettings(ctx, e.user.ID, th.ID, db.ThreadSettings{Compaction: false}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.Compact(ctx, e.user.ID, th.ID); !errors.Is(err, chat.ErrCompactionOff) {
		t.Errorf("compaction off: err = %v, want ErrCompactionOff", err)
	}
}

func TestThePromptEstimateIsCalibratedFromOllamasCounts(t *testing.T) {
	t.Parallel()
	// This model's tokens hold 2.5 characters, not the 4 assumed at first.
	e := newEnv(t, chat.Config{}, fakeollama.WithModels(fakeollama.Model{Name: "tiny", ContextLength: 8192, CharsPerToken: 2.5}))
	ctx := context.Background()
	th, _ := e.conversation(long("calibrate", 600))
	// The observations are saved off the answer's path, within moments.
	samples := func(want int) (cpt float64) {
		var n int
		testwait.For(t, "the calibration's samples", 0, func() bool {
			cpt, n, _ = e.store.Calibration(ctx, "tiny:latest")
			return n >= want
		})
		if n != want {
			t.Fatalf("calibration has %d samples, want %d", n, want)
		}
		return cpt
	}
	samples(1)
	for range 3 {
		e.wait(e.send(th.ID, long("more", 500)))
	}
	if cpt := samples(4); math.Abs(cpt-2.5) > 0.15 {
		t.Errorf("chars per token = %.2f after 4 samples, want about 2.5", cpt)
	}
	t2, err := e.store.Thread(ctx, e.user.ID, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.rt.Assemble(ctx, chat.ContextRequest{User: e.user.ID, Thread: th.ID, Leaf: *t2.ActiveLeafID})
	if err != nil {
		t.Fatal(err)
	}
	actual := fakeollama.TokensOf(2.5, a.Messages)
	if !a.Calibrated || math.Abs(float64(a.Estimate-actual)) > 0.05*float64(actual) {
		t.Errorf("estimate %d vs the server's count %d (calibrated %v), want within 5%%", a.Estimate, actual, a.Calibrated)
	}
}

func TestAnAnswerWarnsWhenOllamaTruncatedThePrompt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{}, fakeollama.WithModels(fakeollama.Model{Name: "tiny", ContextLength: 1024}))
	ctx := context.Background()
	th, first := e.conversation(long("short", 200))
	var usage struct {
		Truncated bool `json:"truncated"`
	}
	if err := jsonUnmarshal(first.Metadata.Raw, "usage", &usage); err != nil || usage.Truncated {
		t.Fatalf("a prompt that fits is marked truncated: %s", first.Metadata.Raw)
	}
	// Without compaction the history outgrows the window; the server drops
	// the oldest messages and the answer says so.
	if err := e.store.UpdateThreadSettings(ctx, e.user.ID, th.ID, db.ThreadSettings{Compaction: false}); err != nil {
		t.Fatal(err)
	}
	var last db.Message
	for _, w := range []string{"bravo", "charlie", "delta", "echo"} {
		_, last = e.wait(e.send(th.ID, long(w, 600)))
	}
	reqs := chatRequests(e.fake)
	if reqs[len(reqs)-1].Truncated == 0 {
		t.Fatalf("the fake did not truncate: the test needs a longer history")
	}
	if err := jsonUnmarshal(last.Metadata.Raw, "usage", &usage); err != nil || !usage.Truncated {
		t.Errorf("the answer to a truncated prompt carries no warning: %s", last.Metadata.Raw)
	}
}
