package views

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/a-h/templ"
	"golang.org/x/net/html"

	"weft/chat"
	"weft/db"
)

// Component tests: render one templ component, parse it as the browser
// would, and look for what the page's users (people and the browser
// tests) rely on, by data-testid.

// doc is a rendered component, parsed.
type doc struct {
	t    *testing.T
	root *html.Node
}

// render renders c into a <body> and parses the result.
func render(t *testing.T, c templ.Component) doc {
	t.Helper()
	var b strings.Builder
	if err := c.Render(context.Background(), &b); err != nil {
		t.Fatalf("render: %v", err)
	}
	root, err := html.Parse(strings.NewReader("<!DOCTYPE html><html><body>" + b.String() + "</body></html>"))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return doc{t: t, root: root}
}

// all returns the elements under n (n included) with that data-testid
// ("": every element), in document order.
func all(n *html.Node, testid string) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && (testid == "" || attr(n, "data-testid") == testid) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

// one returns the only element with that data-testid, failing the test
// when there is none or more than one.
func (d doc) one(testid string) *html.Node {
	d.t.Helper()
	return oneIn(d.t, d.root, testid)
}

func oneIn(t *testing.T, n *html.Node, testid string) *html.Node {
	t.Helper()
	found := all(n, testid)
	if len(found) != 1 {
		t.Fatalf("%d elements with data-testid=%q, want 1", len(found), testid)
	}
	return found[0]
}

// count is how many elements carry that data-testid.
func (d doc) count(testid string) int { return len(all(d.root, testid)) }

// words is the element's text with white space collapsed.
func words(n *html.Node) string { return strings.Join(strings.Fields(textOf(n)), " ") }

// meta is message metadata as the runtime stores it, read back as a row
// scan reads it.
func meta(t *testing.T, v map[string]any) db.MessageMeta {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m db.MessageMeta
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestACompleteAnswerShowsItsTextModelAndUsageWithRegenerateButNoStop(t *testing.T) {
	m := db.Message{ID: 7, ThreadID: 3, Role: "assistant", Status: "complete", Content: "The **weft** runs across.",
		Metadata: meta(t, map[string]any{"model": "tiny:latest", "usage": map[string]any{
			"prompt_tokens": 12, "output_tokens": 34, "tokens_per_second": 56.7, "duration_ms": 1500, "num_ctx": 4096, "context_fill": 0.25}})}
	d := render(t, MessageItem(MessageView{MessageItem: chat.MessageItem{Message: m}}))

	msg := d.one("message")
	if attr(msg, "id") != "m7" || attr(msg, "data-message-id") != "7" || attr(msg, "data-role") != "assistant" || attr(msg, "data-status") != "complete" {
		t.Errorf("message hooks: %v", msg.Attr)
	}
	if got := words(d.one("message-body")); got != "The weft runs across." {
		t.Errorf("body = %q", got)
	}
	if len(all(d.one("message-body"), "")) == 0 || !strings.Contains(renderedHTML(t, d.one("message-body")), "<strong>weft</strong>") {
		t.Errorf("the answer's markdown is not rendered")
	}
	usage := words(d.one("usage"))
	for _, want := range []string{"tiny:latest", "12 in", "34 out", "56.7 tok/s", "1.5 s"} {
		if !strings.Contains(usage, want) {
			t.Errorf("usage %q lacks %q", usage, want)
		}
	}
	if got := words(d.one("context-fill")); got != "25% of 4096 context" {
		t.Errorf("context fill = %q", got)
	}
	d.one("regenerate")
	d.one("fork")
	d.one("delete-message")
	for _, absent := range []string{"stop", "run-status", "retry", "error", "edit"} {
		if n := d.count(absent); n != 0 {
			t.Errorf("a complete answer shows %d %q", n, absent)
		}
	}
	if hasAttr(msg, "sse-connect") {
		t.Errorf("a complete answer opens an event stream")
	}
}

func TestAStreamingAnswerIsAPlaceholderWithItsRunBarStopAndEventStream(t *testing.T) {
	run := db.Run{ID: 21, Status: "running"}
	m := db.Message{ID: 9, Role: "assistant", Status: "streaming", Content: "So far"}
	d := render(t, MessageItem(MessageView{MessageItem: chat.MessageItem{Message: m, Run: &run}}))

	msg := d.one("message")
	if attr(msg, "data-status") != "streaming" || attr(msg, "data-run-id") != "21" {
		t.Errorf("placeholder hooks: %v", msg.Attr)
	}
	if got := attr(msg, "sse-connect"); got != "/runs/21/events?shown=running" {
		t.Errorf("sse-connect = %q", got)
	}
	if attr(msg, "sse-swap") != EventDone || attr(msg, "sse-close") != EventDone {
		t.Errorf("the placeholder is not replaced and closed on %q: %v", EventDone, msg.Attr)
	}
	status := d.one("run-status")
	if words(status) != "Answering…" || attr(status, "data-status") != "running" {
		t.Errorf("run status = %q (%s)", words(status), attr(status, "data-status"))
	}
	stop := d.one("stop")
	if words(stop) != "Stop" || attr(stop, "hx-post") != "/runs/21/cancel" || attr(stop, "type") != "button" {
		t.Errorf("stop button: %q %v", words(stop), stop.Attr)
	}
	if got := words(d.one("message-body")); got != "So far" {
		t.Errorf("text so far = %q", got)
	}
	for _, absent := range []string{"regenerate", "retry", "usage"} {
		if n := d.count(absent); n != 0 {
			t.Errorf("a streaming answer shows %d %q", n, absent)
		}
	}
}

func TestAQueuedAnswersButtonCancelsIt(t *testing.T) {
	d := render(t, RunBar(5, "queued"))
	if got := words(d.one("run-status")); got != "Queued" {
		t.Errorf("status = %q", got)
	}
	if got := words(d.one("stop")); got != "Cancel" {
		t.Errorf("a queued run's button says %q, want Cancel", got)
	}
}

func TestAStreamingMessageWithoutItsRunIsShownFinal(t *testing.T) {
	// The run ended: there is no stream to follow, so no placeholder.
	m := db.Message{ID: 9, Role: "assistant", Status: "streaming", Content: "Partial"}
	d := render(t, MessageItem(MessageView{MessageItem: chat.MessageItem{Message: m}}))
	if hasAttr(d.one("message"), "sse-connect") || d.count("stop") != 0 {
		t.Errorf("a message without a run is rendered as a placeholder")
	}
}

func TestAFailedAnswerShowsItsErrorAndRetry(t *testing.T) {
	m := db.Message{ID: 11, Role: "assistant", Status: "error", Error: "The model tiny is not installed."}
	d := render(t, MessageItem(MessageView{MessageItem: chat.MessageItem{Message: m}}))

	if got := attr(d.one("message"), "data-status"); got != "error" {
		t.Errorf("status = %q", got)
	}
	e := d.one("error")
	if words(e) != "The model tiny is not installed." || attr(e, "role") != "alert" {
		t.Errorf("error: %q %v", words(e), e.Attr)
	}
	retry := d.one("retry")
	form := retry.Parent
	if form.Data != "form" || attr(form, "action") != "/m/11/retry" || attr(form, "method") != "post" {
		t.Errorf("retry does not post to /m/11/retry: %v", form.Attr)
	}
	if d.count("stop") != 0 {
		t.Errorf("a failed answer shows a stop button")
	}
}

func TestAUserMessageShowsItsTextAttachmentsAndEditor(t *testing.T) {
	m := db.Message{ID: 4, Role: "user", Status: "complete", Content: "What is in <these>?"}
	files := []db.Attachment{
		{ID: 40, Name: "photo.png", Kind: "image", Size: 2048, ThumbSHA: "abc"},
		{ID: 41, Name: "notes.pdf", Kind: "document", Size: 5 << 20, TextTruncated: true},
	}
	d := render(t, MessageItem(MessageView{MessageItem: chat.MessageItem{Message: m, Attachments: files}}))

	if got := attr(d.one("message"), "data-role"); got != "user" {
		t.Errorf("role = %q", got)
	}
	if got := words(d.one("message-body")); got != "What is in <these>?" {
		t.Errorf("body = %q (a user's text is shown as typed, never as markup)", got)
	}
	links := all(d.root, "attachment")
	if len(links) != 2 {
		t.Fatalf("%d attachments shown, want 2", len(links))
	}
	if attr(links[0], "href") != "/attachments/40" || attr(links[0], "data-kind") != "image" || attr(links[0], "data-attachment-id") != "40" {
		t.Errorf("image attachment: %v", links[0].Attr)
	}
	if imgs := elements(links[0], "img"); len(imgs) != 1 || attr(imgs[0], "src") != "/attachments/40/thumb" {
		t.Errorf("the image has no thumbnail")
	}
	if elements(links[1], "img") != nil || !strings.Contains(words(links[1]), "notes.pdf") {
		t.Errorf("document attachment: %q", words(links[1]))
	}
	if !strings.Contains(words(links[1].Parent), "only the beginning was given to the model") {
		t.Errorf("a truncated document does not say so")
	}
	form := d.one("edit-form")
	if attr(form, "action") != "/m/4/edit" {
		t.Errorf("edit form posts to %q", attr(form, "action"))
	}
	if got := words(oneIn(t, form, "edit-save")); got != "Save and send" {
		t.Errorf("edit button = %q", got)
	}
	if areas := elements(form, "textarea"); len(areas) != 1 || words(areas[0]) != "What is in <these>?" {
		t.Errorf("the editor does not start from the message's text")
	}
	for _, absent := range []string{"regenerate", "retry", "usage"} {
		if n := d.count(absent); n != 0 {
			t.Errorf("a user message shows %d %q", n, absent)
		}
	}
}

func TestTheComposerOfAThreadPostsWithHtmxAndDisablesSendMeanwhile(t *testing.T) {
	d := render(t, Composer(ComposerData{Action: "/t/3/messages", WorkspaceID: 2, Append: true, ThreadID: 3,
		Models: []string{"tiny:latest", "vision:latest"}, Model: "vision:latest", MaxFiles: 5, MaxFileBytes: 10 << 20}))

	form := d.one("composer")
	if attr(form, "action") != "/t/3/messages" || attr(form, "hx-post") != "/t/3/messages" || attr(form, "hx-target") != "#messages" ||
		attr(form, "hx-swap") != "beforeend" || attr(form, "hx-disabled-elt") != "find button[type=submit]" {
		t.Errorf("composer form: %v", form.Attr)
	}
	if got := attr(d.one("send"), "type"); got != "submit" {
		t.Errorf("send is a %q button", got)
	}
	var selected []string
	for _, o := range elements(form, "option") {
		if hasAttr(o, "selected") {
			selected = append(selected, attr(o, "value"))
		}
	}
	if len(selected) != 1 || selected[0] != "vision:latest" {
		t.Errorf("selected models = %q, want the thread's", selected)
	}
	if d.count("role-select") != 0 {
		t.Errorf("a thread's composer has a role picker (its role changes in the thread's settings)")
	}
	d.one("composer-notice")
	d.one("composer-files")
	d.one("slash-help")
}

func TestTheHomeComposerStartsAThreadWithARoleAndShowsARefusal(t *testing.T) {
	role := db.Role{ID: 8, Name: "Pirate"}
	d := render(t, Composer(ComposerData{Action: "/t", WorkspaceID: 2, Roles: []db.Role{role}, RoleID: &role.ID,
		Content: "kept text", Error: "Write a message first."}))

	form := d.one("composer")
	if hasAttr(form, "hx-post") {
		t.Errorf("the home composer is an htmx form (a new thread is a page of its own)")
	}
	if got := words(d.one("composer-notice")); !strings.Contains(got, "Write a message first.") {
		t.Errorf("notice = %q", got)
	}
	if areas := elements(form, "textarea"); len(areas) != 1 || words(areas[0]) != "kept text" {
		t.Errorf("a refused send lost what was typed")
	}
	var pirate *html.Node
	for _, o := range elements(d.one("role-select"), "option") {
		if attr(o, "value") == "8" {
			pirate = o
		}
	}
	if pirate == nil || !hasAttr(pirate, "selected") {
		t.Errorf("the chosen role is not selected")
	}
}

func TestTheRunTraceOfAnAgentStepShowsTheCallItsOutcomeAndThePendingApproval(t *testing.T) {
	steps := []db.Step{
		{ID: 1, Kind: db.StepModelTurn, Status: db.StepOK, Data: db.StepData{Round: 1, Content: "Let me look.", PromptTokens: 100, OutputTokens: 20,
			Calls: []db.StepCall{{}}}},
		{ID: 2, Kind: db.StepToolCall, Status: db.StepOK, Data: db.StepData{Tool: "list_files", Args: json.RawMessage(`{"path": "."}`), Output: "notes.txt"}},
		{ID: 3, Kind: db.StepToolCall, Status: db.StepRefused, Data: db.StepData{Tool: "write_file", Reason: "Writing is off in this workspace."}},
		{ID: 4, Kind: db.StepApproval, Status: db.StepPending, Data: db.StepData{Tool: "write_file", Args: json.RawMessage(`{"path":"a.txt"}`)}},
	}
	d := render(t, Trace(steps, true))

	round := d.one("round")
	if attr(round, "data-round") != "1" || !strings.Contains(words(round), "100 prompt + 20 output tokens") {
		t.Errorf("round: %q %v", words(round), round.Attr)
	}
	calls := all(d.root, "tool-call")
	if len(calls) != 2 {
		t.Fatalf("%d tool calls shown, want 2", len(calls))
	}
	if attr(calls[0], "data-tool") != "list_files" || attr(calls[0], "data-status") != db.StepOK || attr(calls[0], "data-step-id") != "2" {
		t.Errorf("first call: %v", calls[0].Attr)
	}
	if !strings.Contains(words(calls[0]), `{"path":"."}`) || !strings.Contains(words(calls[0]), "notes.txt") {
		t.Errorf("the call does not show its arguments and result: %q", words(calls[0]))
	}
	if got := words(oneIn(t, calls[1], "tool-reason")); got != "Writing is off in this workspace." {
		t.Errorf("refusal reason = %q", got)
	}
	approval := d.one("approval")
	if attr(approval, "hx-post") != "/steps/4/decide" || attr(approval, "data-step-id") != "4" {
		t.Errorf("approval form: %v", approval.Attr)
	}
	var decisions []string
	for _, b := range elements(approval, "button") {
		decisions = append(decisions, attr(b, "value"))
	}
	if strings.Join(decisions, " ") != "once thread always deny" {
		t.Errorf("decisions offered = %q", decisions)
	}
}

func TestAFinishedAgentAnswerFoldsItsTraceAndShowsADecidedApproval(t *testing.T) {
	steps := []db.Step{
		{ID: 1, Kind: db.StepModelTurn, Status: db.StepOK, Data: db.StepData{Round: 1}},
		{ID: 2, Kind: db.StepApproval, Status: "once", Data: db.StepData{Tool: "write_file"}},
		{ID: 3, Kind: db.StepToolCall, Status: db.StepOK, Data: db.StepData{Tool: "write_file"}},
		{ID: 4, Kind: db.StepModelTurn, Status: db.StepOK, Data: db.StepData{Round: 2}},
	}
	m := db.Message{ID: 5, Role: "assistant", Status: "complete", Content: "Done.", Metadata: meta(t, map[string]any{"route": "agent"})}
	d := render(t, MessageItem(MessageView{MessageItem: chat.MessageItem{Message: m, Steps: steps}}))

	trace := d.one("trace")
	if trace.Data != "details" || hasAttr(trace, "open") {
		t.Errorf("a finished answer's trace is not folded: <%s %v>", trace.Data, trace.Attr)
	}
	if got := words(elements(trace, "summary")[0]); got != "1 tool call in 2 rounds" {
		t.Errorf("trace summary = %q", got)
	}
	if d.count("approval") != 0 {
		t.Errorf("a decided approval is still a form")
	}
	if got := attr(d.one("approval-decided"), "data-decision"); got != "once" {
		t.Errorf("decision shown = %q", got)
	}
}

func TestAKnowledgeBaseAnswerListsTheCitedSourcesOnly(t *testing.T) {
	sources := []db.Source{
		{N: 1, DocumentID: 31, Document: "guide.pdf", Page: 4, Cited: true},
		{N: 2, DocumentID: 32, Document: "faq.md", Headings: []string{"Trams"}},
		{N: 3, DocumentID: 33, Document: "map.md", Cited: true},
	}
	m := db.Message{ID: 12, ThreadID: 3, Role: "assistant", Status: "complete", Content: "Tram 28 [1][3].",
		Metadata: meta(t, map[string]any{"route": "rag", "sources": sources})}
	d := render(t, MessageItem(MessageView{MessageItem: chat.MessageItem{Message: m}}))

	cites := all(d.one("sources"), "citation")
	if len(cites) != 2 {
		t.Fatalf("%d citations shown, want the 2 cited sources", len(cites))
	}
	if attr(cites[0], "href") != "/m/12/sources/1" || attr(cites[0], "data-document-id") != "31" || attr(cites[0], "data-n") != "1" {
		t.Errorf("first citation: %v", cites[0].Attr)
	}
	if got := words(cites[0]); !strings.HasPrefix(got, "[1] guide.pdf") || !strings.Contains(got, "4") {
		t.Errorf("first citation reads %q, want the document and its page", got)
	}
	if got := attr(cites[1], "data-n"); got != "3" {
		t.Errorf("second citation is source %s, want 3", got)
	}
}

func TestASourceCardShowsThePassageWhereItIsAndHowItRanked(t *testing.T) {
	m := db.Message{ID: 12, ThreadID: 3}
	s := db.Source{N: 2, KBID: 6, KB: "Lisbon", Document: "guide.pdf", Page: 4, Headings: []string{"Transport", "Trams"},
		Text: "Tram 28 climbs through Alfama.", VectorRank: 1, TextRank: 0, Fused: 0.0164, Cited: true}
	d := render(t, SourcePage(m, s))

	card := d.one("source")
	if got := words(elements(card, "h1")[0]); got != "[2] guide.pdf" {
		t.Errorf("heading = %q", got)
	}
	if got := words(d.one("source-page")); got != "4" {
		t.Errorf("page = %q", got)
	}
	if got := words(d.one("source-heading")); got != "Transport › Trams" {
		t.Errorf("headings = %q", got)
	}
	if got := words(d.one("source-text")); got != "Tram 28 climbs through Alfama." {
		t.Errorf("passage = %q", got)
	}
	if got := words(d.one("source-vector-rank")); got != "1" {
		t.Errorf("vector rank = %q", got)
	}
	if got := words(d.one("source-text-rank")); got == "0" || got == "" {
		t.Errorf("a source the text search missed shows text rank %q", got)
	}
	if got := words(d.one("source-fused")); got != "0.0164" {
		t.Errorf("fused score = %q", got)
	}
}

func TestTheContextGaugeShowsHowFullTheWindowIsAndWarnsWhenNearlyFull(t *testing.T) {
	d := render(t, ContextGauge(3, 1024, 4096, false))
	g := d.one("context-gauge")
	if attr(g, "data-estimate") != "1024" || attr(g, "data-num-ctx") != "4096" || strings.Contains(attr(g, "class"), "high") {
		t.Errorf("gauge at a quarter: %v", g.Attr)
	}
	if got := words(g); got != "25% of 4096 tokens" {
		t.Errorf("gauge reads %q", got)
	}
	if attr(g, "hx-get") != "/t/3/context" || attr(g, "hx-trigger") != "weft:answered from:body" {
		t.Errorf("the gauge does not refresh after an answer: %v", g.Attr)
	}

	d = render(t, ContextGauge(3, 3500, 4096, true))
	g = d.one("context-gauge")
	if !strings.Contains(attr(g, "class"), "high") {
		t.Errorf("a gauge at 85%% is not marked high: %q", attr(g, "class"))
	}
	if meters := elements(g, "meter"); len(meters) != 1 || attr(meters[0], "value") != "3500" || attr(meters[0], "max") != "4096" {
		t.Errorf("meter: %v", meters)
	}
	if !strings.Contains(words(g), "summarized") {
		t.Errorf("a summarized thread's gauge does not say so: %q", words(g))
	}
}

// elements returns the elements under n with that tag name.
func elements(n *html.Node, tag string) []*html.Node {
	var out []*html.Node
	for _, e := range all(n, "") {
		if e.Data == tag {
			out = append(out, e)
		}
	}
	return out
}

// renderedHTML is n serialized again.
func renderedHTML(t *testing.T, n *html.Node) string {
	t.Helper()
	var b strings.Builder
	if err := html.Render(&b, n); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// htmx wires what it swaps in (hx-post and the rest) only when the swap
// settles, defaultSettleDelay (20 ms) later, on a timer. The run bar and its
// Stop button are swapped in again on every status event, so with the
// default a click in that window did nothing (a lost Stop, and the flaky
// browser tests of issue 13). The page must configure no delay.
func TestEveryPageMakesSwappedInElementsLiveAtOnce(t *testing.T) {
	var b strings.Builder
	if err := Page("Thread", templ.NopComponent).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	root, err := html.Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	var config string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "meta" && attr(n, "name") == "htmx-config" {
			config = attr(n, "content")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	var cfg map[string]any
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		t.Fatalf("htmx-config %q: %v", config, err)
	}
	if d, ok := cfg["defaultSettleDelay"].(float64); !ok || d != 0 {
		t.Errorf("htmx-config defaultSettleDelay = %v (set: %v), want 0", cfg["defaultSettleDelay"], ok)
	}
}
