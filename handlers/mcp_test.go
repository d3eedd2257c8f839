package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"weft/agent"
	"weft/db"
	"weft/internal/mcptest"
	"weft/internal/testenv"
	"weft/internal/testwait"
	"weft/mcp"
)

// mcpConfig is one server named srv, checked and reconnected quickly.
func mcpConfig(servers map[string]mcp.ServerConfig) mcp.Config {
	return mcp.Config{Servers: servers, Retry: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond, Ping: 100 * time.Millisecond,
		Connect: 5 * time.Second, Terminate: time.Second}
}

// waitMCPTool waits until the agent lists the tool and cond holds for it.
func waitMCPTool(t *testing.T, ag *agent.Agent, name, what string, cond func(agent.Tool) bool) agent.Tool {
	t.Helper()
	var tool agent.Tool
	testwait.For(t, name+" "+what, 15*time.Second, func() bool {
		for _, tl := range ag.Tools() {
			if tl.Name == name {
				tool = tl
				return cond(tl)
			}
		}
		return false
	})
	return tool
}

func mcpReady(t agent.Tool) bool { return t.Unavailable == "" }

// toolResults are the tool messages of the model's last request, as
// "tool=content".
func toolResults(e *agentEnv) []string {
	reqs := trStreamed(e.app.Fake)
	var out []string
	for _, msg := range reqs[len(reqs)-1].Chat.Messages {
		if msg.Role == "tool" {
			out = append(out, msg.ToolName+"="+msg.Content)
		}
	}
	return out
}

// The model calls an MCP tool that asks first (not marked read-only) over
// either transport: /tools lists it with its origin, the run waits for the
// approval, and once allowed the server's answer reaches the model's next
// request, the trace and the debug view.
func TestTheModelCallsAnMCPToolAfterApprovalAndGetsItsResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) mcp.ServerConfig
	}{
		{"streamable HTTP", func(t *testing.T) mcp.ServerConfig { return mcptest.StartHTTP(t).Config() }},
		{"stdio", func(t *testing.T) mcp.ServerConfig { return mcptest.StdioConfig(t, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newAgentEnv(t, testenv.Options{MCP: mcpConfig(map[string]mcp.ServerConfig{"srv": tc.cfg(t)})})
			waitMCPTool(t, e.app.Agent, "srv__note", "is available", mcpReady)
			tools := e.c.Get(fmt.Sprintf("/tools?workspace_id=%d", e.ws.ID)).Body
			row := tools[strings.Index(tools, `data-tool="srv__note"`):]
			row = row[:strings.Index(row, "</tr>")]
			for _, want := range []string{"MCP server srv", "Keep a note on the server.", `<option value="ask" selected>`} {
				if !strings.Contains(row, want) {
					t.Errorf("the /tools row of srv__note lacks %s: %s", want, row)
				}
			}

			thread := e.start(`Remember this [[tool:srv__note {"text":"buy milk"}]]`)
			ap := e.pending(thread, db.StepApproval)
			if ap.Data.Tool != "srv__note" {
				t.Fatalf("the approval is for %q", ap.Data.Tool)
			}
			if r := e.c.Post(fmt.Sprintf("/steps/%d/decide", ap.ID), url.Values{"decision": {"once"}}); r.StatusCode != http.StatusSeeOther {
				t.Fatalf("decide: %d %s", r.StatusCode, r.Body)
			}
			run, _ := e.finished(thread)
			if run.Status != db.RunCompleted || strings.Join(e.calls(run.ID), " ") != "srv__note:ok" {
				t.Fatalf("run %s: %s", run.Status, e.describe(run.ID))
			}
			if got := strings.Join(toolResults(e), "|"); got != "srv__note=noted: buy milk" {
				t.Errorf("the model's next request has the results %q", got)
			}
			reqs := trStreamed(e.app.Fake)
			var decl string
			for _, tl := range reqs[0].Chat.Tools {
				if tl.Function.Name == "srv__note" {
					decl = tl.Function.Parameters.String()
				}
			}
			if !strings.Contains(decl, `"text"`) {
				t.Errorf("the model was offered srv__note with the parameters %q", decl)
			}
			page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
			for _, want := range []string{`data-testid="tool-call" data-tool="srv__note" data-status="ok"`, "noted: buy milk",
				`data-testid="approval-decided"`} {
				if !strings.Contains(page, want) {
					t.Errorf("the thread page lacks %s", want)
				}
			}
			if debug := e.c.Get(fmt.Sprintf("/t/%d/debug", thread)).Body; !strings.Contains(debug, "noted: buy milk") {
				t.Errorf("the debug view lacks the result")
			}
		})
	}
}

// A tool the server marks read-only runs without asking, and what it
// returns is untrusted: markup in it is shown as text on the thread page
// and in the debug view, never as markup.
func TestAReadOnlyMCPToolRunsWithoutAskingAndItsMarkupIsShownEscaped(t *testing.T) {
	t.Parallel()
	srv := mcptest.StartHTTP(t)
	e := newAgentEnv(t, testenv.Options{MCP: mcpConfig(map[string]mcp.ServerConfig{"srv": srv.Config()})})
	waitMCPTool(t, e.app.Agent, "srv__html", "is available", mcpReady)
	thread := e.start(`Fetch it [[tool:srv__html {}]]`)
	run, _ := e.finished(thread)
	if run.Status != db.RunCompleted || strings.Join(e.calls(run.ID), " ") != "srv__html:ok" || countSteps(e.steps(run.ID), db.StepApproval) != 0 {
		t.Fatalf("a read-only MCP tool: run %s: %s", run.Status, e.describe(run.ID))
	}
	for _, path := range []string{fmt.Sprintf("/t/%d", thread), fmt.Sprintf("/t/%d/debug", thread)} {
		body := e.c.Get(path).Body
		if strings.Contains(body, `<script>alert("mcp")`) || strings.Contains(body, "<b>bold</b>") {
			t.Errorf("%s renders the server's markup", path)
		}
		if !strings.Contains(body, `&lt;script&gt;alert(&#34;mcp&#34;)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;`) {
			t.Errorf("%s does not show the server's result as text", path)
		}
	}
}

// A server that is down, and a tool it no longer offers, are unavailable
// with their reasons on /tools, and a run that calls them is refused with
// the same words, which the model reads.
func TestMCPToolsOfAServerThatIsDownOrThatWereRemovedAreRefusedWithTheReason(t *testing.T) {
	t.Parallel()
	srv := mcptest.StartHTTP(t)
	e := newAgentEnv(t, testenv.Options{MCP: mcpConfig(map[string]mcp.ServerConfig{"srv": srv.Config()})})
	waitMCPTool(t, e.app.Agent, "srv__note", "is available", mcpReady)
	e.allow("srv__note", agent.ModeAuto) // a workspace rule for the tool about to go
	srv.Remove("note")
	const gone = "The MCP server srv no longer offers this tool."
	waitMCPTool(t, e.app.Agent, "srv__note", "is no longer offered", func(t agent.Tool) bool { return t.Unavailable == gone })
	srv.SetDown(true)
	// The client finds out at its next check.
	down := waitMCPTool(t, e.app.Agent, "srv__echo", "is unreachable", func(t agent.Tool) bool { return !mcpReady(t) }).Unavailable
	if !strings.HasPrefix(down, "The MCP server srv is not reachable: ") {
		t.Fatalf("a server that is down: %q", down)
	}
	tools := e.c.Get(fmt.Sprintf("/tools?workspace_id=%d", e.ws.ID)).Body
	for _, want := range []string{gone, down} {
		if !strings.Contains(tools, want) {
			t.Errorf("/tools does not say %q", want)
		}
	}
	thread := e.start(`Try [[tool:srv__echo {"text":"a"}]] [[tool:srv__note {"text":"b"}]]`)
	run, _ := e.finished(thread)
	if got := strings.Join(e.calls(run.ID), " "); got != "srv__echo:refused srv__note:refused" {
		t.Fatalf("calls: %s: %s", got, e.describe(run.ID))
	}
	// The short reason after "not reachable:" follows the server's last
	// failure, which may change between retries (a refused connection, a
	// 503): the run reads the reason of its own moment.
	const downPrefix = "The MCP server srv is not reachable: "
	got := toolResults(e)
	if len(got) != 2 || !strings.HasPrefix(got[0], "srv__echo=Refused: "+downPrefix) || got[1] != "srv__note=Refused: "+gone {
		t.Errorf("the model read %q", got)
	}
	page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	if !strings.Contains(page, downPrefix) || !strings.Contains(page, gone) {
		t.Errorf("the trace does not show the reasons")
	}
}

// A server's timeout cuts a slow call (the model reads why), and Stop
// ends the run during an MCP call at once, the server told to cancel.
func TestASlowMCPCallIsCutAtItsTimeoutAndStopCancelsACallInFlight(t *testing.T) {
	t.Parallel()
	srv := mcptest.StartHTTP(t)
	cut := srv.Config()
	cut.Timeout = 0.3
	e := newAgentEnv(t, testenv.Options{MCP: mcpConfig(map[string]mcp.ServerConfig{"srv": srv.Config(), "cut": cut})})
	waitMCPTool(t, e.app.Agent, "cut__slow", "is available", mcpReady)
	waitMCPTool(t, e.app.Agent, "srv__slow", "is available", mcpReady)

	thread := e.start(`Think [[tool:cut__slow {}]]`)
	run, _ := e.finished(thread)
	if got := strings.Join(e.calls(run.ID), " "); got != "cut__slow:error" || run.Status != db.RunCompleted {
		t.Fatalf("a call past the server's timeout: %s %s", got, e.describe(run.ID))
	}
	if got := strings.Join(toolResults(e), "|"); got != "cut__slow=Error: The MCP server cut did not answer within 300ms, so the call was stopped." {
		t.Errorf("the model read %q", got)
	}
	testwait.Recv(t, "the first call", time.Second, srv.Calls)

	thread = e.start(`Think longer [[tool:srv__slow {}]]`)
	if name := testwait.Recv(t, "the call", 20*time.Second, srv.Calls); name != "slow" {
		t.Fatalf("the server saw %s", name)
	}
	stopped := time.Now()
	if r := e.c.Post(fmt.Sprintf("/runs/%d/cancel", e.lastRun(thread).ID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("stop: %d", r.StatusCode)
	}
	run, m := e.finished(thread)
	if run.Status != db.RunCancelled || m.Status != db.MsgCancelled {
		t.Errorf("stopped during an MCP call: run %s, answer %s: %s", run.Status, m.Status, e.describe(run.ID))
	}
	if d := time.Since(stopped); d > 5*time.Second {
		t.Errorf("the stop took %s", d)
	}
	testwait.For(t, "the server hears both calls were cancelled", 10*time.Second, func() bool { return srv.Cancelled.Load() == 2 })
}

func writeMCPFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// /admin shows each server's state, transport and tools; /reload-mcp
// reads the file again, and only the administrator may.
func TestAdminShowsTheMCPServersAndReloadsThem(t *testing.T) {
	t.Parallel()
	srv := mcptest.StartHTTP(t)
	file := t.TempDir() + "/mcp.json"
	writeMCPFile(t, file, `{"mcpServers": {"srv": {"url": "`+srv.URL+`", "headers": {"Authorization": "Bearer s3cret"}}, "dead": {"url": "http://127.0.0.1:1/mcp"}}}`)
	servers, err := mcp.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg := mcpConfig(servers)
	cfg.File = file
	e := newAgentEnv(t, testenv.Options{MCP: cfg})
	waitMCPTool(t, e.app.Agent, "srv__echo", "is available", mcpReady)
	testwait.For(t, "the dead server is down", 10*time.Second, func() bool {
		return strings.Contains(e.c.Get("/admin").Body, `data-server="dead" data-state="down"`)
	})
	page := e.c.Get("/admin").Body
	for _, want := range []string{`data-server="srv" data-state="connected"`, "streamable HTTP: " + srv.URL, `data-count="9"`, "big, echo, environ", "connection refused",
		`action="/reload-mcp"`} {
		if !strings.Contains(page, want) {
			t.Errorf("/admin lacks %s", want)
		}
	}
	if strings.Contains(page, "s3cret") {
		t.Errorf("/admin shows a server's headers")
	}
	writeMCPFile(t, file, `{"mcpServers": {"srv": {"url": "`+srv.URL+`"}}}`)
	if r := e.c.Post("/reload-mcp", nil); r.StatusCode != http.StatusSeeOther || !strings.Contains(r.Header.Get("Location"), "mcp-reloaded") {
		t.Fatalf("reload: %d %s", r.StatusCode, r.Header.Get("Location"))
	}
	if page := e.c.Get("/admin").Body; strings.Contains(page, `data-server="dead"`) {
		t.Errorf("after the reload the removed server is still listed")
	}
	writeMCPFile(t, file, `{"mcpServers": {"srv": {"url": "`)
	e.c.Post("/reload-mcp", nil)
	if page := e.c.Get("/admin").Body; !strings.Contains(page, "The configuration file was not reloaded: WEFT_MCP_CONFIG") ||
		!strings.Contains(page, `data-server="srv"`) {
		t.Errorf("a broken file on reload: the error is not shown, or the servers are gone")
	}

	member := testenv.NewClient(t, e.app.TS.URL)
	member.Register("member@example.com", password)
	if r := member.Post("/reload-mcp", nil); r.StatusCode != http.StatusForbidden && r.StatusCode != http.StatusNotFound {
		t.Errorf("a member reloading the MCP servers got %d", r.StatusCode)
	}
}
