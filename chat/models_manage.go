package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ollama/ollama/api"

	"weft/internal/usererr"
)

// The model servers as the models page acts on them (issue 18): which
// servers there are, deleting a model, and what is loaded in memory
// (/api/ps) with unload. Pulls are in pulls.go.

// ModelServer is one model server as the models page names it.
type ModelServer struct {
	Name   string // its label among several ("" with one server)
	URL    string
	client *OllamaClient
}

// modelServers is implemented by the catalogue's client: itself for one
// server, each server for several.
type modelServers interface{ modelServers() []ModelServer }

func (c *OllamaClient) modelServers() []ModelServer {
	return []ModelServer{{URL: c.base.String(), client: c}}
}

func (p *Servers) modelServers() []ModelServer {
	out := make([]ModelServer, len(p.servers))
	for i, s := range p.servers {
		out[i] = ModelServer{Name: s.name, URL: s.url.String(), client: s.client}
	}
	return out
}

// targets are the servers named by server: one by its label, or every
// one for "" (with one server, "" is that one).
func (p *Pulls) targets(server string) ([]ModelServer, error) {
	if len(p.servers) == 0 {
		return nil, usererr.New("Models cannot be managed here: no model server is configured.")
	}
	if server == "" || server == "*" {
		return p.servers, nil
	}
	for _, s := range p.servers {
		if s.Name == server {
			return []ModelServer{s}, nil
		}
	}
	return nil, usererr.New("There is no model server of that name.")
}

// errNotAModel refuses a name no model has, before any server is asked
// (Ollama's 400 would read as a server that did not answer).
var errNotAModel = usererr.New("That is not a model name: open Delete… or Unload on the model's row.")

func onServer(name string) string {
	if name == "" {
		return ""
	}
	return " onto " + name
}

// Delete removes model from server ("": from every server that has it).
// A model being pulled is refused: the pull would bring it back. It is
// unloaded first: Ollama's delete removes the files but leaves the model
// in memory (for good with OLLAMA_KEEP_ALIVE=-1), where no unload can
// reach it any more — that answers 404 once the model is gone.
func (p *Pulls) Delete(ctx context.Context, admin int64, model, server string) error {
	if !modelName.MatchString(model) {
		return errNotAModel
	}
	targets, err := p.targets(server)
	if err != nil {
		return err
	}
	pulling, err := p.store.RunningModelPull(ctx, admin, taggedName(model), "*")
	if err != nil {
		return err
	}
	if pulling {
		return usererr.New(fmt.Sprintf("%s is being pulled: cancel the pull first.", model))
	}
	deleted := 0
	var failed []string
	for _, s := range targets {
		if err := s.client.Unload(ctx, model); err != nil && !isNotFound(err) {
			slog.Warn("unload model before deleting it", "model", model, "server", s.URL, "err", err)
		}
		err := s.client.Delete(ctx, &api.DeleteRequest{Model: model})
		var se api.StatusError
		switch {
		case err == nil:
			deleted++
		case errors.As(err, &se) && se.StatusCode == 404 && len(targets) > 1:
			// not on this one
		case errors.As(err, &se) && se.StatusCode == 404:
			return usererr.New(fmt.Sprintf("%s is not on the model server%s.", model, onServer(s.Name)))
		default:
			slog.Warn("delete model", "model", model, "server", s.URL, "err", err)
			failed = append(failed, s.URL)
		}
	}
	if deleted > 0 {
		p.refresh()
	}
	switch {
	case len(failed) > 0:
		return usererr.New(fmt.Sprintf("%s could not be deleted on %s: the server did not answer. Try again.", model, strings.Join(failed, ", ")))
	case deleted == 0:
		return usererr.New(fmt.Sprintf("%s is on none of the model servers.", model))
	}
	return nil
}

// Loaded is a model in a server's memory (/api/ps).
type Loaded struct {
	Server        string // the server's label ("" with one)
	Name          string
	Size          int64 // bytes in memory
	SizeVRAM      int64 // of which on the GPU
	ContextLength int
	ExpiresAt     time.Time
}

// Loaded lists what every server has in memory; down names the servers
// that did not answer.
func (p *Pulls) Loaded(ctx context.Context) (out []Loaded, down []string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	type result struct {
		ps  *api.ProcessResponse
		err error
	}
	results := make([]result, len(p.servers))
	var wg sync.WaitGroup
	for i, s := range p.servers {
		wg.Go(func() {
			ps, err := s.client.ListRunning(ctx)
			results[i] = result{ps, err}
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.err != nil {
			down = append(down, p.servers[i].URL)
			continue
		}
		for _, m := range r.ps.Models {
			out = append(out, Loaded{Server: p.servers[i].Name, Name: m.Name, Size: m.Size, SizeVRAM: m.SizeVRAM,
				ContextLength: m.ContextLength, ExpiresAt: m.ExpiresAt})
		}
	}
	slices.SortStableFunc(out, func(a, b Loaded) int { return strings.Compare(a.Name, b.Name) })
	return out, down
}

// Unload takes model out of server's memory ("": every server's).
func (p *Pulls) Unload(ctx context.Context, model, server string) error {
	if !modelName.MatchString(model) {
		return errNotAModel
	}
	targets, err := p.targets(server)
	if err != nil {
		return err
	}
	missing := 0
	for _, s := range targets {
		err := s.client.Unload(ctx, model)
		if isNotFound(err) {
			missing++ // not on this server
			continue
		}
		if err != nil {
			slog.Warn("unload model", "model", model, "server", s.URL, "err", err)
			return usererr.New(fmt.Sprintf("%s could not be unloaded%s: the server did not answer.", model, onServer(s.Name)))
		}
	}
	if missing == len(targets) {
		// Ollama unloads only a model it has on disk: one deleted
		// elsewhere stays in memory until its keep-alive ends.
		return usererr.New(fmt.Sprintf("%s is no longer on the model server, so it cannot be unloaded: it leaves memory when its keep-alive ends.", model))
	}
	return nil
}

// isNotFound is the model server's 404: no such model there.
func isNotFound(err error) bool {
	var se api.StatusError
	return errors.As(err, &se) && se.StatusCode == 404
}
