package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"weft/agent"
)

// ToolName is the tool's name as the model sees it (DESIGN §14).
const ToolName = "run_command"

// maxListed bounds the changed files named in the model's result; the
// ledger (Result.Changes) gets them all.
const maxListed = 100

// Provider offers run_command to the agent (agent.AddProvider).
type Provider struct{ S *Sandbox }

// NewProvider returns the shell's tool provider over s.
func NewProvider(s *Sandbox) *Provider { return &Provider{S: s} }

// Tools lists run_command, unavailable with the reason when the sandbox
// cannot be set up here.
func (p *Provider) Tools() []agent.Tool {
	c := p.S.cfg
	return []agent.Tool{{
		Name: ToolName,
		Description: fmt.Sprintf("Run a shell command (/bin/sh -c) in the workspace folder, in a sandbox: no network, "+
			"only the workspace is writable, system programs are read-only, a private empty /tmp, no environment secrets. "+
			"Limits: %s wall-clock, %s CPU, %d MB memory per process, %d processes, %d MB per file; output is cut to its start and end. "+
			"Returns the exit status, stdout, stderr and the workspace files the command created, modified or deleted.",
			c.Timeout, c.CPU, c.Memory>>20, c.Processes, c.FileSize>>20),
		Class:       agent.ClassExec,
		Origin:      "sandboxed shell",
		Unavailable: p.S.Unavailable(),
		Params: []agent.Param{{Name: "command", Type: "string", Required: true,
			Description: "the shell command line, e.g. \"ls -la && wc -l *.txt\""}},
		Run: p.run,
	}}
}

func (p *Provider) run(ctx context.Context, env *agent.Env, args agent.Args) (agent.Result, error) {
	command, err := args.String("command", true)
	if err != nil {
		return agent.Result{}, err
	}
	if strings.TrimSpace(command) == "" {
		return agent.Result{}, agent.Errorf("the command is empty")
	}
	if u := p.S.Unavailable(); u != "" {
		return agent.Result{}, &agent.ToolError{Msg: u}
	}
	// The snapshot is taken even if the context ends during the command:
	// the files changed must be known whatever happened.
	before, err := Take(ctx, env.Root, p.S.cfg.MaxFiles)
	if err != nil {
		return agent.Result{}, err
	}
	o, runErr := p.S.Run(ctx, env.Root, command, env.Progress)
	if errors.Is(runErr, ErrDiskFull) {
		return agent.Result{}, &agent.ToolError{Msg: "The command did not run: " + runErr.Error() + ". Delete files from the workspace to make room."}
	}
	if runErr != nil && !errors.Is(runErr, ErrStopped) {
		return agent.Result{}, runErr
	}
	after, err := Take(context.WithoutCancel(ctx), env.Root, p.S.cfg.MaxFiles)
	if err != nil {
		return agent.Result{}, err
	}
	changes, complete := Diff(before, after)
	if runErr != nil {
		// Stopped: not context.Canceled, so that a resumed run does not
		// run the command again (it may have taken effect). What it
		// changed before it was stopped still joins the answer's ledger.
		return agent.Result{Changes: changes}, runErr
	}
	return agent.Result{Output: p.report(o, changes, complete), Changes: changes}, nil
}

// report is the result the model reads.
func (p *Provider) report(o Outcome, changes []agent.Change, complete bool) string {
	var b strings.Builder
	switch {
	case o.TimedOut:
		fmt.Fprintf(&b, "The command was killed: it ran longer than %s (wall clock).\n", o.Duration.Round(time.Second))
	case o.Flooded:
		fmt.Fprintf(&b, "The command was killed: it wrote more than %d MB of output.\n", p.S.cfg.floodLimit()>>20)
	case o.DiskFull:
		b.WriteString("The command was killed: the workspace's disk was nearly full. Delete files to make room.\n")
	case o.CPULimit:
		fmt.Fprintf(&b, "The command was killed: it used more than %s of CPU time.\n", p.S.cfg.CPU)
	case o.Signal != "":
		fmt.Fprintf(&b, "The command was ended by a signal: %s.\n", o.Signal)
	default:
		fmt.Fprintf(&b, "Exit status: %d\n", o.Exit)
	}
	for _, s := range []struct {
		name string
		c    *Capped
	}{{"stdout", o.Stdout}, {"stderr", o.Stderr}} {
		if s.c.Total() == 0 {
			fmt.Fprintf(&b, "%s: (empty)\n", s.name)
			continue
		}
		fmt.Fprintf(&b, "%s (%d bytes):\n%s", s.name, s.c.Total(), s.c.String())
		if !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
	}
	if len(changes) == 0 {
		b.WriteString("Files changed: none\n")
	} else {
		b.WriteString("Files changed:\n")
		for i, c := range changes {
			if i == maxListed {
				fmt.Fprintf(&b, "  … and %d more\n", len(changes)-maxListed)
				break
			}
			fmt.Fprintf(&b, "  %s %s\n", c.Op, shownPath(c.Path))
		}
	}
	if !complete {
		fmt.Fprintf(&b, "The workspace is too large to compare whole (over %d files and folders, or folders nested over %d deep): changes past that point are not listed.\n", p.S.cfg.MaxFiles, maxDepth)
	}
	return asText(b.String())
}

// shownPath is a changed file's name as the model reads it: quoted when it
// holds a control character (a newline would forge a line of the report)
// or is not UTF-8.
func shownPath(p string) string {
	if !utf8.ValidString(p) || strings.ContainsFunc(p, unicode.IsControl) {
		return strconv.Quote(p)
	}
	return p
}
