package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"weft/db"
)

// conversations reads a fixture through the Scanner and the format's
// parser, as the job does.
func conversations(t *testing.T, file, format string) ([]Conversation, []error) {
	t.Helper()
	data, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Detect(data)
	if err != nil || got != format {
		t.Fatalf("Detect = %q, %v; want %q", got, err, format)
	}
	sc := NewScanner(bytes.NewReader(data), Limits{})
	var out []Conversation
	var errs []error
	for {
		raw, err := sc.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("conversation %d: %v", sc.Position(), err)
		}
		var c Conversation
		if format == FormatChatGPT {
			c, err = ParseChatGPT(raw, Limits{})
		} else {
			c, err = ParseOpenWebUI(raw, Limits{})
		}
		out, errs = append(out, c), append(errs, err)
	}
	return out, errs
}

// shape draws a tree as "parent's text > role: text" lines in order, and
// the active leaf's text.
func shape(th db.ImportedThread) (lines []string, active string) {
	short := func(s string) string {
		s = strings.SplitN(s, "\n", 2)[0]
		if r := []rune(s); len(r) > 24 {
			s = string(r[:24])
		}
		return s
	}
	for _, m := range th.Messages {
		p := "-"
		if m.Parent >= 0 {
			p = short(th.Messages[m.Parent].Content)
		}
		lines = append(lines, fmt.Sprintf("%s > %s: %s", p, m.Role, short(m.Content)))
	}
	if th.ActiveLeaf >= 0 {
		active = short(th.Messages[th.ActiveLeaf].Content)
	}
	return lines, active
}

func TestChatGPTExportsKeepBranchesAndSkipHiddenNodes(t *testing.T) {
	convs, errs := conversations(t, "chatgpt_conversations.json", FormatChatGPT)
	if len(convs) != 4 {
		t.Fatalf("%d conversations, want 4", len(convs))
	}
	cases := []struct {
		title      string
		lines      []string
		active     string
		msgSkipped int
		parts      int
		skip       string
	}{
		{
			title: "Steeping tea ☕ お茶",
			// The hidden system node is passed over: both versions of the
			// first question are roots (siblings, in ChatGPT's order); the
			// tool node under the last question is passed over and its
			// answer hangs under the question.
			lines: []string{
				"- > user: How long should I steep ",
				"- > user: How long should I steep ",
				"How long should I steep  > assistant: About **2–3 minutes** at",
				"How long should I steep  > assistant: One minute is plenty.",
				"How long should I steep  > assistant: Steep sencha for 60–90 s",
				"Steep sencha for 60–90 s > user: [image not imported]",
				"[image not imported] > assistant: That looks like gyokuro ",
			},
			active: "That looks like gyokuro ", msgSkipped: 3, parts: 1,
		},
		{
			title: "Primes in Python",
			lines: []string{
				"- > user: List the primes below 20",
				"List the primes below 20 > assistant: ```python",
				"```python > assistant: 2, 3, 5, 7, 11, 13, 17 a",
			},
			active: "2, 3, 5, 7, 11, 13, 17 a", msgSkipped: 3, parts: 1,
		},
		{
			title:  "Заметки — short",
			lines:  []string{"- > user: Привет! Say hi in three ", "Привет! Say hi in three  > assistant: Hi · Hallo · こんにちは"},
			active: "Hi · Hallo · こんにちは", msgSkipped: 2,
		},
		{title: "New chat", skip: "it has no messages with text", msgSkipped: 2},
	}
	for i, c := range cases {
		t.Run(c.title, func(t *testing.T) {
			got := convs[i]
			if c.skip != "" {
				var se *SkipError
				if !errors.As(errs[i], &se) || se.Reason != c.skip {
					t.Fatalf("err = %v, want the skip %q", errs[i], c.skip)
				}
				return
			}
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if got.Thread.Title != c.title {
				t.Errorf("title %q", got.Thread.Title)
			}
			lines, active := shape(got.Thread)
			if strings.Join(lines, "\n") != strings.Join(c.lines, "\n") {
				t.Errorf("tree:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(c.lines, "\n"))
			}
			if active != c.active {
				t.Errorf("active leaf %q, want %q", active, c.active)
			}
			if got.MessagesSkipped != c.msgSkipped || got.PartsSkipped != c.parts {
				t.Errorf("skipped %d messages, %d parts; want %d, %d", got.MessagesSkipped, got.PartsSkipped, c.msgSkipped, c.parts)
			}
		})
	}
	tea := convs[0].Thread
	if !tea.CreatedAt.Equal(time.Unix(1717171717, 123456000).UTC()) || !tea.UpdatedAt.Equal(time.Unix(1717172717, 5e8).UTC()) {
		t.Errorf("times %v, %v", tea.CreatedAt, tea.UpdatedAt)
	}
	var meta struct{ Model, ImportedFrom string }
	if err := json.Unmarshal(tea.Messages[4].Metadata, &struct {
		Model        *string `json:"model"`
		ImportedFrom *string `json:"imported_from"`
	}{&meta.Model, &meta.ImportedFrom}); err != nil || meta.Model != "gpt-4o-mini" || meta.ImportedFrom != "chatgpt" {
		t.Errorf("metadata %s", tea.Messages[4].Metadata)
	}
	if !tea.Messages[2].CreatedAt.Equal(time.Unix(1717171725, 5e8).UTC()) {
		t.Errorf("message time %v", tea.Messages[2].CreatedAt)
	}
	if !strings.Contains(tea.Messages[5].Content, "Which tea is this?") {
		t.Errorf("the text beside the image was lost: %q", tea.Messages[5].Content)
	}
}

func TestOpenWebUIExportsKeepBranchesErrorsAndTheCurrentMessage(t *testing.T) {
	convs, errs := conversations(t, "openwebui_export.json", FormatOpenWebUI)
	if len(convs) != 3 {
		t.Fatalf("%d conversations, want 3", len(convs))
	}
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs[0], errs[1])
	}
	lines, active := shape(convs[0].Thread)
	want := []string{
		"- > user: Which model should I use",
		"- > user: Which model should I use",
		"Which model should I use > assistant: llama3.1:8b is a solid d",
		"Which model should I use > assistant: Try qwen2.5:7b — it foll",
		"Which model should I use > assistant: ",
		"Try qwen2.5:7b — it foll > user: Summarise the attached P",
		"Summarise the attached P > assistant: The report says revenue ",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("tree:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if active != "The report says revenue " {
		t.Errorf("active %q", active)
	}
	th := convs[0].Thread
	if failed := th.Messages[4]; failed.Status != db.MsgError || !strings.Contains(failed.Error, "more system memory") {
		t.Errorf("the failed answer: %+v", failed)
	}
	if !strings.Contains(string(th.Messages[3].Metadata), `"model":"qwen2.5:7b"`) {
		t.Errorf("model not kept: %s", th.Messages[3].Metadata)
	}
	if convs[0].PartsSkipped != 1 || !strings.Contains(th.Messages[5].Content, "[attachment not imported]") {
		t.Errorf("the attached file: %d parts, %q", convs[0].PartsSkipped, th.Messages[5].Content)
	}
	if !th.CreatedAt.Equal(time.Unix(1720000000, 0).UTC()) || !th.UpdatedAt.Equal(time.Unix(1720000300, 0).UTC()) {
		t.Errorf("times %v %v", th.CreatedAt, th.UpdatedAt)
	}

	// The system message is passed over; the user's question becomes the
	// root; the pasted image is a note; the chat's model is the answer's.
	lines, active = shape(convs[1].Thread)
	want = []string{"- > user: Wie groß ist die Erde?", "Wie groß ist die Erde? > assistant: Etwa 12 742 km im Durchm"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") || active != "Etwa 12 742 km im Durchm" {
		t.Errorf("tree:\n%s (active %q)", strings.Join(lines, "\n"), active)
	}
	if convs[1].MessagesSkipped != 1 || convs[1].PartsSkipped != 1 {
		t.Errorf("skipped %d messages, %d parts", convs[1].MessagesSkipped, convs[1].PartsSkipped)
	}
	if !strings.Contains(string(convs[1].Thread.Messages[1].Metadata), `"model":"mistral:7b"`) {
		t.Errorf("model %s", convs[1].Thread.Messages[1].Metadata)
	}

	var se *SkipError
	if !errors.As(errs[2], &se) || !strings.Contains(se.Reason, "not shaped like an Open WebUI conversation") {
		t.Errorf("the broken chat: %v", errs[2])
	}
}

func TestOlderOpenWebUIChatsWithOnlyAMessageListAreAChain(t *testing.T) {
	raw := []byte(`{"title":"old","chat":{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}}`)
	c, err := ParseOpenWebUI(raw, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	lines, active := shape(c.Thread)
	if strings.Join(lines, "|") != "- > user: a|a > assistant: b|b > user: c" || active != "c" {
		t.Errorf("%q active %q", lines, active)
	}
}

func TestTreesSurviveLoopsDanglingParentsAndDepth(t *testing.T) {
	msg := func(role, text string) string {
		return fmt.Sprintf(`{"author":{"role":%q},"content":{"content_type":"text","parts":[%q]}}`, role, text)
	}
	var b strings.Builder
	b.WriteString(`{"title":"loops","mapping":{`)
	// a chain 30,000 deep would be over the message cap; 15,000 is not.
	const deep = 15_000
	for i := 0; i < deep; i++ {
		parent := "null"
		if i > 0 {
			parent = fmt.Sprintf(`"n%d"`, i-1)
		}
		fmt.Fprintf(&b, `"n%d":{"id":"n%d","parent":%s,"children":["n%d"],"message":%s},`, i, i, parent, i+1, msg("user", fmt.Sprint("m", i)))
	}
	// x1 and x2 are each other's parent: never reached from a root.
	b.WriteString(`"x1":{"id":"x1","parent":"x2","children":["x2"],"message":` + msg("user", "loop1") + `},`)
	b.WriteString(`"x2":{"id":"x2","parent":"x1","children":["x1"],"message":` + msg("user", "loop2") + `},`)
	// a self-parent and a missing parent become roots.
	b.WriteString(`"s":{"id":"s","parent":"s","message":` + msg("user", "self") + `},`)
	b.WriteString(`"d":{"id":"d","parent":"gone","message":` + msg("assistant", "dangling") + `}`)
	b.WriteString(`},"current_node":"x1"}`)
	c, err := ParseChatGPT([]byte(b.String()), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Thread.Messages); n != deep+2 {
		t.Fatalf("%d messages, want %d", n, deep+2)
	}
	for i, m := range c.Thread.Messages {
		if m.Parent >= i {
			t.Fatalf("message %d has parent %d", i, m.Parent)
		}
	}
	if c.MessagesSkipped != 2 || c.Thread.ActiveLeaf != -1 || !strings.Contains(strings.Join(c.Notes, ";"), "2 messages in a loop") {
		t.Errorf("skipped %d, active %d, notes %q", c.MessagesSkipped, c.Thread.ActiveLeaf, c.Notes)
	}
	_, err = ParseChatGPT([]byte(b.String()), Limits{MaxMessages: 1000})
	if se := (*SkipError)(nil); !errors.As(err, &se) || !strings.Contains(se.Reason, "more than 1000 messages") {
		t.Errorf("over the cap: %v", err)
	}
}

func TestHostileFilesAreSkippedOrRefusedWithAReason(t *testing.T) {
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	huge := `{"title":"` + strings.Repeat("x", 2<<20) + `","mapping":{}}`
	for _, c := range []struct {
		name, file string
		lim        Limits
		want       []string // per element: "" a conversation, else the reason's words; "broken: …" ends it
	}{
		{"a nesting bomb inside a conversation", `[{"mapping":` + deep + `}, {"mapping":{}}]`, Limits{},
			[]string{"nested more than 64 levels", ""}},
		{"a nesting bomb as the list", `[` + strings.Repeat("[", 100_000), Limits{}, []string{"broken: the file ends in the middle of conversation 1"}},
		{"a conversation over the size cap", `[` + huge + `,{"mapping":{}}]`, Limits{MaxConversationBytes: 1 << 20},
			[]string{"larger than 1 MB", ""}},
		{"not a list", `"hello"`, Limits{}, []string{"broken: the file is not a JSON list"}},
		{"numbers in the list", `[1, "two", {"mapping":{}}]`, Limits{}, []string{"conversation 1 is not a JSON object", "conversation 2 is not a JSON object", ""}},
		{"a truncated file", `[{"mapping":{}}, {"mapping":{"a":`, Limits{}, []string{"", "broken: the file ends in the middle of conversation 2"}},
		{"garbage between conversations", `[{"mapping":{}} x {"mapping":{}}]`, Limits{}, []string{"", "broken: the file is not valid JSON after conversation 1"}},
		{"an empty list", ` [ ] `, Limits{}, nil},
		{"one conversation, not in a list", "\xef\xbb\xbf" + `{"mapping":{}}`, Limits{}, []string{""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := NewScanner(strings.NewReader(c.file), c.lim)
			var got []string
			for {
				_, err := sc.Next()
				if err == io.EOF {
					break
				}
				var se *SkipError
				var be *BrokenError
				switch {
				case err == nil:
					got = append(got, "")
				case errors.As(err, &se):
					got = append(got, se.Reason)
				case errors.As(err, &be):
					got = append(got, "broken: "+be.Reason)
				default:
					t.Fatal(err)
				}
				if be != nil {
					break
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			for i := range got {
				if (c.want[i] == "") != (got[i] == "") || !strings.Contains(got[i], c.want[i]) {
					t.Errorf("element %d: %q, want %q", i, got[i], c.want[i])
				}
			}
		})
	}
}

func TestWrongTypesInvalidUTF8AndNULsAreHandled(t *testing.T) {
	_, err := ParseChatGPT([]byte(`{"title":5,"mapping":{}}`), Limits{})
	if se := (*SkipError)(nil); !errors.As(err, &se) || !strings.Contains(se.Reason, "“title” has the wrong type") {
		t.Errorf("a number for a title: %v", err)
	}
	raw := []byte("{\"title\":\"bad \xff\\u0000 title\",\"mapping\":{\"a\":{\"id\":\"a\",\"message\":{\"author\":{\"role\":\"user\"}," +
		"\"content\":{\"content_type\":\"text\",\"parts\":[\"nul\\u0000 and \xfe\"]},\"metadata\":{\"model_slug\":\"m\\u0000\"}}}}}")
	c, err := ParseChatGPT(raw, Limits{MaxMessageRunes: 5})
	if err != nil {
		t.Fatal(err)
	}
	m := c.Thread.Messages[0]
	if strings.ContainsRune(c.Thread.Title, 0) || strings.ContainsRune(m.Content, 0) || bytes.Contains(m.Metadata, []byte(`\u0000`)) {
		t.Errorf("a NUL survived: %q %q %s", c.Thread.Title, m.Content, m.Metadata)
	}
	if !strings.HasPrefix(m.Content, "nul a") || !strings.Contains(m.Content, "cut on import") {
		t.Errorf("a long message is cut with a note: %q", m.Content)
	}
}

func TestDetectTellsTheFormatFromTheContent(t *testing.T) {
	for _, c := range []struct {
		file, want string
		err        error
	}{
		{`{"format":"weft-thread","version":1,"messages":[]}`, FormatWeft, nil},
		{`{"title":"x","messages":[],"format":"weft-thread"}`, FormatWeft, nil},
		{`[{"title":"x","create_time":1,"mapping":{}}]`, FormatChatGPT, nil},
		{`[{"id":"x","user_id":"u","title":"t","chat":{}}]`, FormatOpenWebUI, nil},
		{`{"title":"one","mapping":{}}`, FormatChatGPT, nil},
		{`[]`, "", ErrEmpty},
		{`[{"format":"weft-thread"}]`, "", ErrUnknownFormat},
		{`{"some":"thing"}`, "", ErrUnknownFormat},
		{`PK\x03\x04`, "", ErrUnknownFormat},
		{``, "", ErrUnknownFormat},
		{`[{"title":"` + strings.Repeat("a", DetectBytes) + `"}]`, "", ErrUnknownFormat},
	} {
		got, err := Detect([]byte(c.file))
		if got != c.want || !errors.Is(err, c.err) {
			t.Errorf("Detect(%.40q) = %q, %v; want %q, %v", c.file, got, err, c.want, c.err)
		}
	}
}

func TestCountReadsTheWholeFileAndRefusesABrokenOne(t *testing.T) {
	n, err := Count(strings.NewReader(`[{"a":"]}"},{"b":[1,{"c":"\""}]}, 3]`), Limits{})
	if n != 3 || err != nil {
		t.Errorf("Count = %d, %v", n, err)
	}
	if _, err := Count(strings.NewReader(`[{"a":1},`), Limits{}); err == nil {
		t.Error("a truncated file was counted")
	}
}

// Content kinds Weft does not read may hold objects where others hold
// text: the message is passed over, the conversation is imported.
func TestUnknownContentKindsDoNotSkipTheConversation(t *testing.T) {
	raw := []byte(`{"title":"kinds","mapping":{
		"a":{"id":"a","message":{"author":{"role":"user"},"content":{"content_type":"text","parts":["hi"]},"status":"finished_successfully","recipient":"all"}},
		"b":{"id":"b","parent":"a","message":{"author":{"role":"assistant"},"content":{"content_type":"super_widget","text":{"widget":1},"language":7},"recipient":null,"metadata":{"model_slug":null}}},
		"c":{"id":"c","parent":"b","message":{"author":{"role":"assistant"},"content":{"content_type":"text","parts":["hello"]},"metadata":{"model_slug":"gpt-5"}}}
	},"current_node":"c"}`)
	c, err := ParseChatGPT(raw, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	lines, active := shape(c.Thread)
	if strings.Join(lines, "|") != "- > user: hi|hi > assistant: hello" || active != "hello" || c.PartsSkipped != 1 {
		t.Errorf("%q active %q, %d parts", lines, active, c.PartsSkipped)
	}
}

// A conversation that is mostly one enormous list — a mapping of empty
// nodes, a "parts" list of numbers — is skipped from its bytes before it is
// decoded: json.Unmarshal would build every item first (gigabytes and tens
// of seconds from one 32 MB conversation).
func TestAConversationWithAnEnormousListIsSkippedBeforeItIsDecoded(t *testing.T) {
	var nodes, parts strings.Builder
	nodes.WriteString(`{"title":"wide","mapping":{`)
	parts.WriteString(`{"title":"wide","mapping":{"a":{"id":"a","message":{"author":{"role":"user"},"content":{"parts":[`)
	for i := range 150_000 {
		fmt.Fprintf(&nodes, `"%d":{},`, i)
		parts.WriteString("1,")
	}
	nodes.WriteString(`"z":{}}}`)
	parts.WriteString(`"hi"]}}}}}`)
	for name, raw := range map[string]string{"a mapping of 150,000 empty nodes": nodes.String(), "a list of 150,000 parts": parts.String()} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := ParseChatGPT([]byte(raw), Limits{})
		runtime.ReadMemStats(&after)
		if se := (*SkipError)(nil); !errors.As(err, &se) || !strings.Contains(se.Reason, "a list of more than 100000 items") {
			t.Errorf("%s: %v", name, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
			t.Errorf("%s: %d MB allocated to refuse it", name, n>>20)
		}
	}
}

// Pictures and files left out leave a note each, but a message of
// thousands of them does not grow into one many times its size (nor take
// time quadratic in their number, as adding notes one string at a time
// did).
func TestThousandsOfPartsLeftOutLeaveABoundedMessage(t *testing.T) {
	list := "[" + strings.Repeat(`{"type":"image"},`, 20_000) + `{"type":"image"}]`
	owui := `{"title":"files","chat":{"history":{"messages":{"a":{"id":"a","role":"user","content":"hi","files":` + list + `}}}}}`
	gpt := `{"title":"parts","mapping":{"a":{"id":"a","message":{"author":{"role":"user"},"content":{"parts":` +
		strings.ReplaceAll(list, `"type"`, `"content_type"`) + `}}}}}`
	for name, parse := range map[string]func() (Conversation, error){
		"Open WebUI files": func() (Conversation, error) { return ParseOpenWebUI([]byte(owui), Limits{}) },
		"ChatGPT parts":    func() (Conversation, error) { return ParseChatGPT([]byte(gpt), Limits{}) },
	} {
		c, err := parse()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m := c.Thread.Messages[0].Content
		if c.PartsSkipped != 20_001 || len(m) > 8<<10 || !strings.HasPrefix(strings.TrimPrefix(m, "hi\n\n"), "[image not imported]") ||
			!strings.HasSuffix(m, "[19901 more parts not imported]") {
			t.Errorf("%s: %d parts skipped, a message of %d bytes: %.80q … %q", name, c.PartsSkipped, len(m), m, m[max(0, len(m)-40):])
		}
	}
}

func TestItemsSplitsAListWithoutDecodingIt(t *testing.T) {
	for raw, want := range map[string][]string{
		` [ "a\"],b" , {"x":[1,{"y":"]"}]},3,[ ] ] `: {`"a\"],b"`, `{"x":[1,{"y":"]"}]}`, `3`, `[ ]`},
		`[]`:        nil,
		`[ ]`:       nil,
		`"parts"`:   nil,
		`null`:      nil,
		`{"a":[1]}`: nil,
	} {
		var got []string
		items([]byte(raw), func(item []byte) { got = append(got, string(item)) })
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %q, want %q", raw, got, want)
		}
	}
}
