package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/agent"
	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// Agent runs whose own rounds outgrow a small context window: the older
// rounds are summarized into a checkpoint (a compaction step and card), the
// files-changed ledger stays whole, and a resumed run goes on from the
// checkpoint.

// compactRounds is how many tool rounds the compacting runs make: each
// writes step{i}.txt and reads doc{i}.txt, a document of about 330 tokens
// (bigDoc: 825), so that a window of 2,048 tokens holds three of them.
const compactRounds = 7

// smallToolie is the fake with the tool model's window cut to 2,048.
func smallToolie(t *testing.T) *fakeollama.Server {
	ms := fakeollama.DefaultModels()
	for i := range ms {
		if ms[i].Name == "toolie" {
			ms[i].ContextLength = 2048
		}
	}
	return fakeollama.New(t, fakeollama.WithModels(ms...))
}

// bigDoc is the document two and a half times as long as the others: the
// round reading it makes the next request overflow the window at once.
const bigDoc = 3

// docMarker is a word only doc{i}.txt contains.
func docMarker(i int) string { return fmt.Sprintf("zebra%dmarker", i) }

// writeDocs puts doc1.txt … doc{n}.txt into the workspace.
func (e *agentEnv) writeDocs(n int) {
	e.t.Helper()
	if err := os.MkdirAll(e.root, 0o750); err != nil {
		e.t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		n := 40
		if i == bigDoc {
			n = 100
		}
		text := docMarker(i) + " " + strings.Repeat(fmt.Sprintf("document %d says the tide is %d. ", i, i*7), n)
		if err := os.WriteFile(filepath.Join(e.root, fmt.Sprintf("doc%d.txt", i)), []byte(text), 0o600); err != nil {
			e.t.Fatal(err)
		}
	}
}

// isCheckpointSummary: the request asks for an agent run's checkpoint.
func isCheckpointSummary(req *api.ChatRequest) bool {
	return req.Stream != nil && !*req.Stream && len(req.Messages) > 0 &&
		strings.Contains(req.Messages[0].Content, "tool-using agent")
}

// checkpointIn is the index of the checkpoint message in msgs, or -1.
func checkpointIn(msgs []api.Message) int {
	return slices.IndexFunc(msgs, func(m api.Message) bool {
		return m.Role == "user" && strings.HasPrefix(m.Content, "[Checkpoint of this agent run.")
	})
}

// roundsScript is a model that works through the rounds by what is in the
// workspace: the first i whose step{i}.txt is missing gets a round writing
// it and reading doc{i}.txt; when all are written it answers. Summaries and
// titles get the fake's default replies; hang, while set, holds the first
// agent request that carries a checkpoint open until the server stops.
func roundsScript(root string, hang *atomic.Bool) func(req *api.ChatRequest) fakeollama.Reply {
	return func(req *api.ChatRequest) fakeollama.Reply {
		if req.Stream != nil && !*req.Stream {
			return fakeollama.DefaultReply(req)
		}
		if hang != nil && hang.Load() && checkpointIn(req.Messages) >= 0 {
			return fakeollama.Reply{Hang: true}
		}
		for i := 1; i <= compactRounds; i++ {
			if _, err := os.Stat(filepath.Join(root, fmt.Sprintf("step%d.txt", i))); err == nil {
				continue
			}
			w := api.NewToolCallFunctionArguments()
			w.Set("path", fmt.Sprintf("step%d.txt", i))
			w.Set("content", fmt.Sprintf("step %d", i))
			r := api.NewToolCallFunctionArguments()
			r.Set("path", fmt.Sprintf("doc%d.txt", i))
			return fakeollama.Reply{ToolCalls: []api.ToolCall{
				{Function: api.ToolCallFunction{Name: "write_file", Arguments: w}},
				{Function: api.ToolCallFunction{Name: "read_file", Arguments: r}},
			}}
		}
		return fakeollama.Reply{Chunks: []string{"All steps are written."}}
	}
}

// compactEnv is an agent env over the small window, with write_file
// allowed and the documents in place.
func compactEnv(t *testing.T, store *db.DB, fake *fakeollama.Server, dataDir, instance, email string, register bool) *agentEnv {
	o := testenv.Options{DefaultModel: "toolie", Fake: fake, Agent: agent.Config{DataDir: dataDir}}
	o.Chat.Instance = instance
	e := agentEnvOn(t, store, o, email, register)
	e.allow("write_file", agent.ModeAuto)
	return e
}

func stepsOf(steps []db.Step, kind string) []db.Step {
	var out []db.Step
	for _, s := range steps {
		if s.Kind == kind {
			out = append(out, s)
		}
	}
	return out
}

func hasChange(changes []db.FileChange, path string) bool {
	return slices.ContainsFunc(changes, func(c db.FileChange) bool { return c.Path == path })
}

func TestALongAgentRunSummarizesItsOlderRoundsIntoACheckpointAndKeepsTheLedger(t *testing.T) {
	t.Parallel()
	fake := smallToolie(t)
	e := compactEnv(t, testenv.NewDB(t), fake, "", "compact-"+t.Name(), "compact@example.com", true)
	e.writeDocs(compactRounds)
	fake.SetScript(roundsScript(e.root, nil))

	thread := e.start("Write every step file and read its document.")
	run, m := e.finished(thread)
	if run.Status != db.RunCompleted || m.Content != "All steps are written." {
		t.Fatalf("run %s (%s) %q: %s", run.Status, run.Error, m.Content, e.describe(run.ID))
	}

	// The run wrote checkpoints: compaction steps, each covering the
	// rounds from the first, with the ledger up to there.
	cps := stepsOf(e.steps(run.ID), db.StepCompaction)
	if len(cps) == 0 {
		t.Fatalf("no checkpoint was written: %s", e.describe(run.ID))
	}
	// The round reading the big document would have overflowed the next
	// request: its checkpoint came first; later ones came as the rounds
	// filled the window again.
	if cps[0].Data.Trigger != db.CompactOverflow || cps[0].Data.Round != bigDoc ||
		!slices.ContainsFunc(cps[1:], func(s db.Step) bool { return s.Data.Trigger == db.CompactAfterTools }) {
		for _, c := range cps {
			t.Logf("checkpoint after round %d: covers %d, %s, %d → %d tokens", c.Data.Round, c.Data.Covers, c.Data.Trigger, c.Data.TokensBefore, c.Data.TokensAfter)
		}
		t.Errorf("want an overflow checkpoint after round %d, then one after tools", bigDoc)
	}
	first := cps[0]
	if first.Status != db.StepOK || first.Data.Covers < 1 || !strings.HasPrefix(first.Data.Content, "Summary: ") {
		t.Fatalf("the first checkpoint = %s %+v", first.Status, first.Data)
	}
	if !hasChange(first.Data.Changes, "step1.txt") || first.Data.TokensAfter >= first.Data.TokensBefore {
		t.Errorf("the first checkpoint's ledger %v, tokens %d → %d", first.Data.Changes, first.Data.TokensBefore, first.Data.TokensAfter)
	}

	// The checkpoint summary was asked of the model with the summarized
	// rounds' results; the next request sends the summary, with the files
	// changed so far, instead of those rounds.
	var summaries []fakeollama.Recorded
	for _, r := range fake.Requests() {
		if r.Chat != nil && isCheckpointSummary(r.Chat) {
			summaries = append(summaries, r)
		}
	}
	if len(summaries) < len(cps) || !strings.Contains(summaries[0].Chat.Messages[1].Content, "Result of read_file: "+docMarker(1)) {
		t.Fatalf("%d summary requests for %d checkpoints; the first: %.300q", len(summaries), len(cps), summaries[0].Chat.Messages[1].Content)
	}
	reqs := trStreamed(fake)
	after := slices.IndexFunc(reqs, func(r fakeollama.Recorded) bool { return checkpointIn(r.Chat.Messages) >= 0 })
	if after <= 0 {
		t.Fatalf("no agent request carries a checkpoint")
	}
	msgs := reqs[after].Chat.Messages
	cp := msgs[checkpointIn(msgs)].Content
	if !strings.Contains(cp, "Summary of the work so far:\nSummary: ") || !strings.Contains(cp, "- created step1.txt") {
		t.Errorf("the checkpoint message lacks the summary or the ledger: %q", cp)
	}
	if !strings.Contains(fmt.Sprint(reqs[after-1].Chat.Messages), docMarker(1)) {
		t.Errorf("the request before the checkpoint did not carry the first round's result")
	}
	for i, r := range reqs[after:] {
		if strings.Contains(fmt.Sprint(r.Chat.Messages), docMarker(1)) {
			t.Errorf("request %d after the checkpoint still sends the first round's result", after+i)
		}
	}
	// Nothing was cut or left out, and no request outgrew the window.
	for i, r := range reqs {
		if r.Truncated != 0 || r.PromptTokens > r.NumCtx {
			t.Errorf("request %d: %d prompt tokens in a window of %d, %d messages dropped by the model server", i, r.PromptTokens, r.NumCtx, r.Truncated)
		}
		for _, msg := range r.Chat.Messages {
			if strings.Contains(msg.Content, "to fit the context window; it is in the run's trace") || strings.Contains(msg.Content, "Cut here to fit") {
				t.Errorf("request %d cut a tool result instead of summarizing", i)
			}
		}
	}

	// The final evidence lists every file, those of summarized rounds too.
	if m.Metadata.Evidence == nil {
		t.Fatalf("the answer has no evidence: %s", m.Metadata.Raw)
	}
	for i := 1; i <= compactRounds; i++ {
		if !hasChange(m.Metadata.Evidence.Changes, fmt.Sprintf("step%d.txt", i)) {
			t.Errorf("the evidence lacks step%d.txt: %v", i, m.Metadata.Evidence.Changes)
		}
	}

	// The trace shows the checkpoint as a card with the rounds it covers
	// and the summary to unfold.
	page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	card := fmt.Sprintf(`data-testid="agent-checkpoint" data-status="ok" data-covers="%d"`, first.Data.Covers)
	if !strings.Contains(page, card) || !strings.Contains(page, `data-testid="checkpoint-summary">Summary: `) {
		t.Errorf("the thread page lacks the checkpoint card %s", card)
	}
	for i := 1; i <= compactRounds; i++ {
		if !strings.Contains(page, fmt.Sprintf(`data-testid="file-change" data-op="created" data-path="step%d.txt"`, i)) {
			t.Errorf("the answer does not list step%d.txt", i)
		}
	}
	if want := fmt.Sprintf("· %d checkpoints", len(cps)); !strings.Contains(page, want) {
		t.Errorf("the folded trace does not say %q", want)
	}
	debug := e.c.Get(fmt.Sprintf("/t/%d/debug", thread)).Body
	if n := strings.Count(debug, `data-testid="debug-checkpoint" data-status="ok"`); n != len(cps) {
		t.Errorf("the debug view lists %d checkpoints, want %d", n, len(cps))
	}
}

func TestAnAgentRunResumedAfterACheckpointGoesOnFromIt(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	fake := smallToolie(t)
	dir := t.TempDir()
	first := compactEnv(t, store, fake, dir, "cp-first-"+t.Name(), "cpresume@example.com", true)
	first.writeDocs(compactRounds)
	var hang atomic.Bool
	hang.Store(true)
	fake.SetScript(roundsScript(first.root, &hang))

	thread := first.start("Write every step file and read its document.")
	// The server stops while the request after the first checkpoint runs.
	testwait.For(t, "the request after the first checkpoint", 20*time.Second, func() bool {
		for _, r := range fake.Requests() {
			if r.Chat != nil && checkpointIn(r.Chat.Messages) >= 0 && (r.Chat.Stream == nil || *r.Chat.Stream) {
				return true
			}
		}
		return false
	})
	run := first.lastRun(thread)
	before := stepsOf(first.steps(run.ID), db.StepCompaction)
	if len(before) != 1 || before[0].Status != db.StepOK {
		t.Fatalf("checkpoints before the stop: %+v", before)
	}
	first.shutdown(50 * time.Millisecond)
	if run = first.lastRun(thread); run.Status != db.RunInterrupted {
		t.Fatalf("after the stop the run is %s", run.Status)
	}

	hang.Store(false)
	second := compactEnv(t, store, fake, dir, "cp-second-"+t.Name(), "cpresume@example.com", false)
	from := len(fake.Requests())
	if r := second.c.Post(fmt.Sprintf("/runs/%d/resume", run.ID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("resume: %d %s", r.StatusCode, r.Body)
	}
	run, m := second.finished(thread)
	if run.Status != db.RunCompleted || m.Content != "All steps are written." {
		t.Fatalf("resumed: %s (%s) %q: %s", run.Status, run.Error, m.Content, second.describe(run.ID))
	}
	// Its first request is the checkpoint and the rounds after it, sent
	// without summarizing again.
	resumed := fake.Requests()[from:]
	firstAgent := slices.IndexFunc(resumed, func(r fakeollama.Recorded) bool {
		return r.Chat != nil && (r.Chat.Stream == nil || *r.Chat.Stream)
	})
	if firstAgent < 0 {
		t.Fatalf("the resumed run sent no request")
	}
	for _, r := range resumed[:firstAgent] {
		if isCheckpointSummary(r.Chat) {
			t.Errorf("the resumed run summarized again before its first request")
		}
	}
	msgs := resumed[firstAgent].Chat.Messages
	if i := checkpointIn(msgs); i < 0 || !strings.Contains(msgs[i].Content, before[0].Data.Content) {
		t.Errorf("the resumed run's first request does not start from the checkpoint: %q", trRoles(resumed[firstAgent].Chat))
	}
	if strings.Contains(fmt.Sprint(msgs), docMarker(1)) {
		t.Errorf("the resumed run sent the summarized first round again")
	}
	// No step was redone, and the ledger is whole.
	calls := second.calls(run.ID)
	if n := len(calls); n != 2*compactRounds {
		t.Errorf("%d tool calls, want %d (each round once): %v", n, 2*compactRounds, calls)
	}
	if got := stepsOf(second.steps(run.ID), db.StepCompaction); got[0].ID != before[0].ID {
		t.Errorf("the first checkpoint was written again")
	}
	for i := 1; i <= compactRounds; i++ {
		if !hasChange(m.Metadata.Evidence.Changes, fmt.Sprintf("step%d.txt", i)) {
			t.Errorf("the evidence lacks step%d.txt: %v", i, m.Metadata.Evidence.Changes)
		}
	}
}

func TestAFailedCheckpointSummaryFallsBackToCuttingAndSaysSo(t *testing.T) {
	t.Parallel()
	fake := smallToolie(t)
	e := compactEnv(t, testenv.NewDB(t), fake, "", "cpfail-"+t.Name(), "cpfail@example.com", true)
	e.writeDocs(compactRounds)
	rounds := roundsScript(e.root, nil)
	fake.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		if isCheckpointSummary(req) {
			return fakeollama.Reply{ErrorBefore: &fakeollama.HTTPError{Status: 500, Message: "out of memory"}}
		}
		return rounds(req)
	})
	thread := e.start("Write every step file and read its document.")
	run, m := e.finished(thread)
	if run.Status != db.RunCompleted || m.Content != "All steps are written." {
		t.Fatalf("run %s (%s) %q: %s", run.Status, run.Error, m.Content, e.describe(run.ID))
	}
	cps := stepsOf(e.steps(run.ID), db.StepCompaction)
	if len(cps) == 0 || cps[0].Status != db.StepError || !strings.Contains(cps[0].Data.Error, "left out of the next requests instead") {
		t.Fatalf("checkpoint steps: %+v", cps)
	}
	// Older results were left out of the requests instead.
	var elided bool
	for _, r := range trStreamed(fake) {
		if checkpointIn(r.Chat.Messages) >= 0 {
			t.Errorf("a request carries a checkpoint that was never written")
		}
		for _, msg := range r.Chat.Messages {
			elided = elided || strings.Contains(msg.Content, "left out to fit the context window")
		}
	}
	if !elided {
		t.Errorf("no tool result was left out after the summary failed")
	}
	page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	if !strings.Contains(page, `data-testid="agent-checkpoint" data-status="error"`) || !strings.Contains(page, `data-testid="checkpoint-error"`) {
		t.Errorf("the trace does not show the failed checkpoint")
	}
	if !hasChange(m.Metadata.Evidence.Changes, "step1.txt") {
		t.Errorf("the evidence lacks step1.txt")
	}
}

// Before sending, an agent run's thread history is compacted as a chat
// answer's is: its older turns are summarized into a compaction node.
func TestAnAgentRequestCompactsTheThreadsHistoryFirst(t *testing.T) {
	t.Parallel()
	fake := smallToolie(t)
	e := compactEnv(t, testenv.NewDB(t), fake, "", "cphist-"+t.Name(), "cphist@example.com", true)
	// Two long chat exchanges (agent off) fill most of the window.
	r := e.c.Post("/t", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "content": {long("alpha", 1400)}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("send: %d %s", r.StatusCode, r.Body)
	}
	var thread int64
	fmt.Sscanf(r.Header.Get("Location"), "/t/%d", &thread)
	if run, _ := e.finished(thread); run.Kind != "chat" {
		t.Fatalf("the first answer's route is %s", run.Kind)
	}
	e.send(thread, long("bravo", 1400))
	e.finished(thread)
	// The agent's request adds its execution context: it no longer fits.
	r = e.c.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"agent_present": {"1"}, "agent": {"on"},
		"content": {`Now list the files [[tool:list_files {"path":"."}]]`}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("send: %d %s", r.StatusCode, r.Body)
	}
	run, m := e.finished(thread)
	if run.Kind != "agent" || run.Status != db.RunCompleted {
		t.Fatalf("run %s %s (%s): %s", run.Kind, run.Status, run.Error, e.describe(run.ID))
	}
	reqs := trStreamed(fake)
	agentReqs := reqs[2:]
	for i, req := range agentReqs {
		sys := req.Chat.Messages[0].Content
		if !strings.Contains(sys, "Summary of the earlier part of this conversation") || !strings.Contains(sys, "You are working as an agent") {
			t.Errorf("agent request %d does not send the history's summary: %.200q", i, sys)
		}
		if strings.Contains(fmt.Sprint(req.Chat.Messages[1:]), "alpha alpha") {
			t.Errorf("agent request %d sends the summarized first turn again", i)
		}
		if req.Truncated != 0 || req.PromptTokens > req.NumCtx {
			t.Errorf("agent request %d: %d prompt tokens in a window of %d", i, req.PromptTokens, req.NumCtx)
		}
	}
	path, _, err := e.app.Store.ActivePath(context.Background(), e.user.ID, thread, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(path) != 6 || path[5].ID != m.ID {
		t.Errorf("the visible path has %d messages, want all 6", len(path))
	}
	if !strings.Contains(e.c.Get(fmt.Sprintf("/t/%d", thread)).Body, `data-testid="compaction"`) {
		t.Errorf("the thread shows no compaction marker")
	}
}

// long is about n characters of one word repeated.
func long(word string, n int) string {
	return strings.TrimSpace(strings.Repeat(word+" ", n/(len(word)+1)))
}
