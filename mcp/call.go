package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/ollama/ollama/api"

	"weft/agent"
)

// maxResult caps the text a call gives the model, as the built-ins cap
// theirs.
const maxResult = 64 << 10

// codeRejected is the SDK's error code for a request its transport could
// not deliver (jsonrpc2.ErrRejected): the server is unreachable, it did not
// refuse the call.
const codeRejected = -32005

var (
	errServerTimeout = errors.New("the MCP server's timeout")
	// errInterrupted ends a call whose context ended (Stop, shutdown). It
	// is not context.Canceled on purpose: the server may have acted, so a
	// resumed run must not make an effectful call again.
	errInterrupted = errors.New("the MCP call was interrupted")
)

// call calls one of the server's tools. Every failure is a tool error the
// model reads; none is the run's.
func (s *server) call(ctx context.Context, env *agent.Env, tool string, args agent.Args) (agent.Result, error) {
	s.m.mu.Lock()
	sess, down := s.sess, s.unavailableLocked()
	s.m.mu.Unlock()
	if sess == nil {
		return agent.Result{}, agent.Errorf("%s", down)
	}
	cctx := ctx
	if d := s.cfg.callTimeout(); d > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeoutCause(ctx, d, errServerTimeout)
		defer cancel()
	}
	params := &sdk.CallToolParams{Name: tool, Arguments: map[string]any(args)}
	if env != nil && env.Progress != nil {
		token, done := s.watchProgress(env.Progress)
		defer done()
		params.SetProgressToken(token)
	}
	res, err := sess.CallTool(cctx, params)
	if err != nil {
		switch {
		case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
			return agent.Result{}, ctx.Err() // the agent's tool timeout: it says so
		case ctx.Err() != nil:
			return agent.Result{}, errInterrupted
		case errors.Is(context.Cause(cctx), errServerTimeout):
			return agent.Result{}, agent.Errorf("The MCP server %s did not answer within %s, so the call was stopped.", s.name, s.cfg.callTimeout())
		}
		var werr *jsonrpc.Error
		if errors.As(err, &werr) && werr.Code != codeRejected {
			return agent.Result{}, agent.Errorf("The MCP server %s refused the call: %s", s.name, agent.Clip(werr.Message, 1000))
		}
		signal(s.broken)
		return agent.Result{}, agent.Errorf("The MCP server %s is not reachable: %s.", s.name, shortReason(err))
	}
	text := resultText(res)
	if res.IsError {
		if text == "" {
			text = "the tool reported an error without a message"
		}
		return agent.Result{}, agent.Errorf("%s", text)
	}
	return agent.Result{Output: text}, nil
}

// resultText is a result as text for the model: text content joined,
// anything else summarised, capped at maxResult.
func resultText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image%s, %s]", mimeNote(c.MIMEType), size(len(c.Data))))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio%s, %s]", mimeNote(c.MIMEType), size(len(c.Data))))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s %s]", c.Name, c.URI))
		case *sdk.EmbeddedResource:
			switch r := c.Resource; {
			case r == nil:
				parts = append(parts, "[resource]")
			case r.Text != "":
				parts = append(parts, fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text))
			default:
				parts = append(parts, fmt.Sprintf("[resource %s%s, %s]", r.URI, mimeNote(r.MIMEType), size(len(r.Blob))))
			}
		default:
			parts = append(parts, fmt.Sprintf("[%T content]", c))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return agent.CapText(strings.Join(parts, "\n"), maxResult)
}

func mimeNote(m string) string {
	if m == "" {
		return ""
	}
	return " " + m
}

func size(n int) string {
	if n < 1024 {
		return strconv.Itoa(n) + " bytes"
	}
	return strconv.Itoa((n+512)/1024) + " KB"
}

// shortReason says in a few words why a server cannot be reached, for
// every user: never an address, header or command line (the
// administrator sees the whole error on /admin).
func shortReason(err error) string {
	var exitErr *exec.ExitError
	var dnsErr *net.DNSError
	var execErr *exec.Error
	var werr *jsonrpc.Error
	msg := err.Error()
	switch {
	case msg == "stopped":
		return "it was stopped"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the connection was refused"
	case errors.Is(err, context.DeadlineExceeded):
		return "it did not answer in time"
	case errors.As(err, &dnsErr):
		return "its host name is not known"
	case errors.As(err, &execErr):
		return "its program could not be started"
	case errors.As(err, &exitErr), errors.Is(err, sdk.ErrConnectionClosed), strings.Contains(msg, "closed the connection"),
		strings.Contains(msg, "EOF"), strings.Contains(msg, "broken pipe"):
		return "the connection closed"
	case errors.As(err, &werr) && werr.Code != codeRejected:
		return "it answered with an error"
	case strings.Contains(msg, "401") || strings.Contains(msg, "403") || strings.Contains(strings.ToLower(msg), "unauthorized"):
		return "it refused Weft's credentials"
	default:
		return "the connection failed"
	}
}

// schemaOf is a tool's input schema for the model (nil: no arguments).
func schemaOf(raw json.RawMessage) *api.ToolFunctionParameters {
	if len(raw) == 0 {
		return nil
	}
	var p api.ToolFunctionParameters
	if err := json.Unmarshal(raw, &p); err != nil {
		return &api.ToolFunctionParameters{Type: "object", Properties: api.NewToolPropertiesMap()}
	}
	return &p
}

// watchProgress routes the server's progress notifications for one call
// to report, until done.
func (s *server) watchProgress(report func(string)) (token string, done func()) {
	s.progMu.Lock()
	s.progSeq++
	token = "weft-" + strconv.Itoa(s.progSeq)
	s.progress[token] = report
	s.progMu.Unlock()
	return token, func() {
		s.progMu.Lock()
		delete(s.progress, token)
		s.progMu.Unlock()
	}
}

func (s *server) progressed(p *sdk.ProgressNotificationParams) {
	if p == nil {
		return
	}
	token := fmt.Sprint(p.ProgressToken)
	s.progMu.Lock()
	report := s.progress[token]
	s.progMu.Unlock()
	if report == nil {
		return
	}
	text := p.Message
	if text == "" {
		text = strconv.FormatFloat(p.Progress, 'f', -1, 64)
		if p.Total > 0 {
			text += " of " + strconv.FormatFloat(p.Total, 'f', -1, 64)
		}
	}
	report(agent.Clip(text, 500))
}
