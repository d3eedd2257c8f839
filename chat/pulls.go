package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/internal/usererr"
)

// Models in the browser (issue 18): pulling models onto the model servers
// with progress every tab and instance sees, deleting them, and what is
// loaded in memory (/api/ps) with unload.
//
// A pull is a row of model_pulls (db/model_pulls.go) run by the instance
// that started it: the stream of /api/pull is read by OllamaClient.Pull,
// its lines folded into the pull's progress in memory, and the progress
// written at most every FlushEvery (1 s), each write notifying every
// instance (db.NotePull; its end db.NotePullEnd), whose followers read the
// row again. Cancel,
// from any instance, sets the row's flag and notifies (db.NotePullStop):
// the instance running the pull cancels its request at once (or at its
// next write, which reads the flag, when the note was lost). A pull whose
// instance stopped or died is marked interrupted (the runtime's start-up
// and housekeeping), never left running.

// PullStore is the storage of pulls.
type PullStore interface {
	StartModelPull(ctx context.Context, admin int64, model, server, instance string) (db.ModelPull, error)
	ModelPull(ctx context.Context, admin, id int64) (db.ModelPull, error)
	RunningModelPull(ctx context.Context, admin int64, model, server string) (bool, error)
	CancelModelPull(ctx context.Context, admin, id int64) (db.ModelPull, error)
	SaveModelPull(ctx context.Context, id int64, pr db.PullProgress) (bool, error)
	FinishModelPull(ctx context.Context, id int64, status string, pr db.PullProgress, errText string) error
	InterruptOrphanedPulls(ctx context.Context, self string, staleAfter time.Duration) ([]int64, error)
	InterruptStalledPulls(ctx context.Context, instance string, live []int64, staleAfter time.Duration) ([]int64, error)
}

// Pulls manages the models of the model servers.
type Pulls struct {
	store      PullStore
	models     *Models
	servers    []ModelServer
	instance   string
	flushEvery time.Duration
	ctx        context.Context // the runtime's life

	mu       sync.Mutex
	live     map[int64]*livePull
	watchers map[int64]map[chan struct{}]struct{}
	closed   bool // shutting down: nothing starts
	wg       sync.WaitGroup
	ended    sync.Map // status → *atomic.Int64: pulls of this instance that ended so
}

// Running is how many pulls run on this instance now (a metric).
func (p *Pulls) Running() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.live)
}

// Ended is how many pulls of this instance ended with status (a metric).
func (p *Pulls) Ended(status string) int64 {
	if n, ok := p.ended.Load(status); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

func (p *Pulls) count(status string) {
	n, _ := p.ended.LoadOrStore(status, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
}

var (
	errPullCancelled = errors.New("pull cancelled")
	errPullShutdown  = errors.New("server shutting down")
)

func newPulls(ctx context.Context, store PullStore, models *Models, instance string, flushEvery time.Duration) *Pulls {
	p := &Pulls{store: store, models: models, instance: instance, flushEvery: flushEvery, ctx: ctx,
		live: map[int64]*livePull{}, watchers: map[int64]map[chan struct{}]struct{}{}}
	if ms, ok := models.client.(modelServers); ok {
		p.servers = ms.modelServers()
	}
	return p
}

// Servers lists the model servers, in OLLAMA_HOST's order.
func (p *Pulls) Servers() []ModelServer { return p.servers }

// modelName is what a pull accepts: a registry name such as
// "llama3.2", "qwen3:8b" or "hf.co/org/model:Q4_K_M".
var modelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,299}$`)

// taggedName is name with Ollama's default tag when it has none
// ("llama3.2" is "llama3.2:latest"), as the servers list it: a pull is
// recorded under it, so that one model is one running pull whichever way
// it was typed, and a delete from the list sees it being pulled.
func taggedName(name string) string {
	if i := strings.LastIndex(name, "/"); !strings.Contains(name[i+1:], ":") {
		return name + ":latest"
	}
	return name
}

// Pull starts pulling model onto server ("": every server), for admin,
// and returns the pulls started. A name that is not a model name, or a
// model already being pulled onto that server, is refused.
func (p *Pulls) Pull(ctx context.Context, admin int64, model, server string) ([]db.ModelPull, error) {
	model = taggedName(strings.TrimSpace(model))
	if !modelName.MatchString(model) {
		return nil, usererr.New("Type a model name such as llama3.2 or qwen3:8b (letters, digits and . _ : / @ + -, at most 300).")
	}
	targets, err := p.targets(server)
	if err != nil {
		return nil, err
	}
	var out []db.ModelPull
	for _, s := range targets {
		pull, err := p.store.StartModelPull(ctx, admin, model, s.Name, p.instance)
		if errors.Is(err, db.ErrConflict) {
			if len(targets) == 1 {
				return nil, usererr.New(fmt.Sprintf("%s is already being pulled%s.", model, onServer(s.Name)))
			}
			continue // the other servers still get it
		}
		if err != nil {
			return out, err
		}
		p.start(pull, s)
		out = append(out, pull)
	}
	if len(out) == 0 {
		return nil, usererr.New(fmt.Sprintf("%s is already being pulled onto every server.", model))
	}
	return out, nil
}

// Cancel stops a running pull, wherever it runs.
func (p *Pulls) Cancel(ctx context.Context, admin, id int64) (db.ModelPull, error) {
	pull, err := p.store.CancelModelPull(ctx, admin, id)
	if err != nil {
		return pull, err
	}
	p.stopLive(id, errPullCancelled)
	return pull, nil
}

// Follow emits the pull as it is, then every change of it, until it ends
// (the last emit is its final state) or ctx ends. The same state is sent
// again every 15 s, which keeps the stream alive through proxies.
func (p *Pulls) Follow(ctx context.Context, admin, id int64, emit func(db.ModelPull) error) error {
	ch, unwatch := p.watch(id)
	defer unwatch()
	var last db.ModelPull
	sent := time.Time{}
	for {
		pull, err := p.store.ModelPull(ctx, admin, id)
		if err != nil {
			return err
		}
		if pull.UpdatedAt != last.UpdatedAt || pull.Status != last.Status || time.Since(sent) > 15*time.Second {
			if err := emit(pull); err != nil {
				return err
			}
			last, sent = pull, time.Now()
		}
		if !pull.Running() {
			return nil
		}
		select {
		case <-ch:
		case <-time.After(3 * time.Second): // a lost note
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// watch returns a channel that receives (coalesced) when pull changes.
func (p *Pulls) watch(id int64) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	p.mu.Lock()
	if p.watchers[id] == nil {
		p.watchers[id] = map[chan struct{}]struct{}{}
	}
	p.watchers[id][ch] = struct{}{}
	p.mu.Unlock()
	return ch, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.watchers[id], ch)
		if len(p.watchers[id]) == 0 {
			delete(p.watchers, id)
		}
	}
}

// wake tells the watchers of pull id (every pull's: all).
func (p *Pulls) wake(id int64, all bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pid, ws := range p.watchers {
		if !all && pid != id {
			continue
		}
		for ch := range ws {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// note takes a note about a pull (on the listener's goroutine).
func (p *Pulls) note(n db.Note) {
	switch n.Kind {
	case db.NotePullStop:
		p.stopLive(n.ID, errPullCancelled)
	case db.NotePullEnd:
		// The pull may have ended on another instance: its model is read
		// again by the next page instead of after the catalogue's 30 s.
		// (Not on every progress write: the catalogue would be read from
		// the servers every second for as long as a pull runs.)
		p.models.Invalidate()
	}
	p.wake(n.ID, false)
}

// connected catches up after the listener (re)connected: followers read
// their pull again; a lost stop note is read by the next progress write.
func (p *Pulls) connected() { p.wake(0, true) }

func (p *Pulls) stopLive(id int64, why error) {
	p.mu.Lock()
	lp := p.live[id]
	p.mu.Unlock()
	if lp != nil {
		lp.cancel(why)
	}
}

// recover marks interrupted the pulls of a previous life of this instance
// (self) or of dead instances.
func (p *Pulls) recover(ctx context.Context, self string, staleAfter time.Duration) {
	ids, err := p.store.InterruptOrphanedPulls(ctx, self, staleAfter)
	if err != nil {
		slog.Warn("interrupt orphaned model pulls", "err", err)
	} else if len(ids) > 0 {
		slog.Info("model pulls interrupted by a stopped instance", "count", len(ids))
	}
}

// settleStalled marks interrupted the pulls this instance ran whose end
// could not be written (housekeeping): their rows would say running
// forever.
func (p *Pulls) settleStalled(ctx context.Context, staleAfter time.Duration) {
	p.mu.Lock()
	live := make([]int64, 0, len(p.live))
	for id := range p.live {
		live = append(live, id)
	}
	p.mu.Unlock()
	if ids, err := p.store.InterruptStalledPulls(ctx, p.instance, live, staleAfter); err != nil {
		slog.Warn("interrupt stalled model pulls", "err", err)
	} else if len(ids) > 0 {
		slog.Info("model pulls whose end was not saved interrupted", "count", len(ids))
	}
}

// shutdown interrupts the running pulls and waits until their rows say so.
func (p *Pulls) shutdown() {
	p.mu.Lock()
	p.closed = true
	for _, lp := range p.live {
		lp.cancel(errPullShutdown)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// livePull is a pull running on this instance.
type livePull struct {
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	pr      db.PullProgress
	layers  map[string][2]int64 // digest → completed, total
	success bool
	// what the last write saved, for the speed
	savedAt        time.Time
	savedCompleted int64
}

// Bounds of what a model server's progress lines may make a pull hold:
// its words are untrusted (a NUL, which Postgres refuses in text, would
// keep the row from ever being written again), and a hostile or broken
// server could send endless distinct layers or sizes that overflow.
const (
	maxPullText   = 200     // runes of a status line shown on the row
	maxPullDigest = 100     // a layer's digest ("sha256:" and 64 hex digits)
	maxPullLayers = 256     // layers counted; more are not summed
	maxLayerBytes = 1 << 44 // 16 TB: a layer's total and completed
)

// update folds one progress line in.
func (lp *livePull) update(r api.ProgressResponse) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lp.pr.StatusText = usererr.Untrusted(r.Status, maxPullText)
	if r.Status == "success" {
		lp.success = true
	}
	digest := usererr.Untrusted(r.Digest, maxPullDigest)
	if _, seen := lp.layers[digest]; digest == "" || (!seen && len(lp.layers) >= maxPullLayers) {
		return
	}
	total := min(max(r.Total, 0), maxLayerBytes)
	lp.pr.Digest = digest
	lp.layers[digest] = [2]int64{min(max(r.Completed, 0), total), total}
	lp.pr.Layers = len(lp.layers)
	lp.pr.Completed, lp.pr.Total = 0, 0
	for _, l := range lp.layers {
		lp.pr.Completed += l[0]
		lp.pr.Total += l[1]
	}
}

// snapshot returns the progress to write, with the speed since the last
// write.
func (lp *livePull) snapshot(now time.Time) db.PullProgress {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if el := now.Sub(lp.savedAt).Seconds(); el > 0 && !lp.savedAt.IsZero() {
		lp.pr.BytesPerSec = max(0, int64(float64(lp.pr.Completed-lp.savedCompleted)/el))
	}
	lp.savedAt, lp.savedCompleted = now, lp.pr.Completed
	return lp.pr
}

func (p *Pulls) start(pull db.ModelPull, s ModelServer) {
	ctx, cancel := context.WithCancelCause(p.ctx)
	lp := &livePull{cancel: cancel, layers: map[string][2]int64{}, savedAt: time.Now()}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		cancel(errPullShutdown)
		if err := p.store.FinishModelPull(context.WithoutCancel(p.ctx), pull.ID, db.PullInterrupted, db.PullProgress{},
			"The server was stopping. Pull it again."); err != nil {
			slog.Error("finish model pull", "pull", pull.ID, "err", err)
		}
		return
	}
	p.live[pull.ID] = lp
	p.wg.Add(1)
	p.mu.Unlock()
	go p.run(ctx, pull, s, lp)
}

// run reads the pull's stream, writes its progress every flushEvery, and
// settles it.
func (p *Pulls) run(ctx context.Context, pull db.ModelPull, s ModelServer, lp *livePull) {
	defer p.wg.Done()
	saverDone := make(chan struct{})
	stopSaver := make(chan struct{})
	go func() {
		defer close(saverDone)
		t := time.NewTicker(p.flushEvery)
		defer t.Stop()
		for {
			select {
			case <-stopSaver:
				return
			case <-t.C:
			}
			// Written even when nothing changed: the write reads the
			// cancel flag, in case a stop note was lost.
			pr := lp.snapshot(time.Now())
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			stop, err := p.store.SaveModelPull(wctx, pull.ID, pr)
			cancel()
			if err != nil {
				slog.Warn("save model pull progress", "pull", pull.ID, "err", err)
				continue
			}
			p.wake(pull.ID, false)
			if stop {
				lp.cancel(errPullCancelled)
			}
		}
	}()
	err := s.client.Pull(ctx, &api.PullRequest{Model: pull.Model}, func(r api.ProgressResponse) error {
		lp.update(r)
		return nil
	})
	close(stopSaver)
	<-saverDone
	pr := lp.snapshot(time.Now())
	lp.mu.Lock()
	success := lp.success
	lp.mu.Unlock()
	status, errText := db.PullCompleted, ""
	switch cause := context.Cause(ctx); {
	case success && err == nil:
	case errors.Is(cause, errPullCancelled):
		status = db.PullCancelled
	case ctx.Err() != nil:
		status, errText = db.PullInterrupted, "The server stopped while this model was being pulled. Pull it again to resume: what was downloaded is kept."
	default:
		status, errText = db.PullFailed, describePullError(err, s)
	}
	if status == db.PullCompleted {
		// Before the row says so: whoever sees the pull completed finds
		// the model in the catalogue.
		p.refresh()
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	if ferr := p.store.FinishModelPull(wctx, pull.ID, status, pr, errText); ferr != nil {
		slog.Error("finish model pull", "pull", pull.ID, "err", ferr)
	}
	cancel()
	p.mu.Lock()
	delete(p.live, pull.ID)
	p.mu.Unlock()
	p.count(status)
	lp.cancel(nil)
	p.wake(pull.ID, false)
	slog.Info("model pull ended", "pull", pull.ID, "model", pull.Model, "server", s.URL, "status", status)
}

// refresh makes the catalogue read the servers again (a model arrived or
// left).
func (p *Pulls) refresh() {
	if r, ok := p.models.client.(interface{ Refresh(context.Context) }); ok {
		ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		r.Refresh(ctx)
		cancel()
	}
	p.models.Invalidate()
}

// describePullError says why a pull failed, in words for its row.
func describePullError(err error, s ModelServer) string {
	var se api.StatusError
	var ue *url.Error
	var ne net.Error
	switch {
	case err == nil:
		return "The model server ended the pull before it was complete."
	case errors.As(err, &se):
		if msg := usererr.Untrusted(se.ErrorMessage, maxServerMessage); msg != "" {
			return "The model server refused the pull: " + msg
		}
		return fmt.Sprintf("The model server refused the pull (HTTP %d).", se.StatusCode)
	case errors.As(err, &ue), errors.As(err, &ne):
		return fmt.Sprintf("Ollama is not reachable at %s. Start it with `ollama serve`, or set OLLAMA_HOST to where it runs, then pull again.", s.URL)
	}
	// An error line of the stream: the server's words ("pull model
	// manifest: file does not exist" for a name the registry lacks).
	if msg := usererr.Untrusted(err.Error(), maxServerMessage); msg != "" {
		if strings.Contains(msg, "file does not exist") {
			return "The pull failed: " + msg + " (no model of that name in the registry; check its spelling and tag)."
		}
		return "The pull failed: " + msg
	}
	return GenericFailure
}
