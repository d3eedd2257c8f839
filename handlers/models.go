package handlers

import (
	"context"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"weft/chat"
	"weft/db"
	"weft/internal/usererr"
	"weft/views"
)

// modelManager pulls, deletes and unloads models (chat.Pulls).
type modelManager interface {
	Servers() []chat.ModelServer
	Pull(ctx context.Context, admin int64, model, server string) ([]db.ModelPull, error)
	Cancel(ctx context.Context, admin, id int64) (db.ModelPull, error)
	Follow(ctx context.Context, admin, id int64, emit func(db.ModelPull) error) error
	Delete(ctx context.Context, admin int64, model, server string) error
	Loaded(ctx context.Context) ([]chat.Loaded, []string)
	Unload(ctx context.Context, model, server string) error
}

// modelList is the catalogue as the models page shows it.
type modelList interface {
	List(ctx context.Context) ([]chat.Model, error)
	Where(name string) []string
}

type pullStore interface {
	ModelPulls(ctx context.Context, admin int64, limit int) ([]db.ModelPull, error)
	ModelPull(ctx context.Context, admin, id int64) (db.ModelPull, error)
}

// modelPages serves /models (everyone: the list) and /admin/models
// (administrators: pull with live progress, cancel, delete, unload).
type modelPages struct {
	store    pullStore
	models   modelList
	manager  modelManager
	shell    *shell
	streams  *streamRegistry
	sessions interface {
		Token(context.Context) string
		Put(ctx context.Context, key string, val any)
	}
	closing <-chan struct{}
}

// pullsShown is how many pulls /admin/models lists (running ones first).
const pullsShown = 20

// data gathers what the page shows; admin adds pulls and loaded models.
func (h *modelPages) data(ctx context.Context, user int64, admin bool) (views.ModelsData, error) {
	d := views.ModelsData{Admin: admin, Servers: h.manager.Servers()}
	models, err := h.models.List(ctx)
	if err != nil {
		d.Error = "The model server did not answer, so its models cannot be listed now. Check that Ollama runs at OLLAMA_HOST."
	}
	d.Models = models
	if len(d.Servers) > 1 {
		d.Where = map[string]string{}
		for _, m := range models {
			d.Where[m.Name] = strings.Join(h.models.Where(m.Name), ", ")
		}
	}
	if admin {
		if d.Pulls, err = h.store.ModelPulls(ctx, user, pullsShown); err != nil {
			return d, err
		}
		d.Loaded, d.Down = h.manager.Loaded(ctx)
	}
	return d, nil
}

// list serves GET /models: the models, without the controls.
func (h *modelPages) list(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	h.render(w, r, http.StatusOK, u.ID, false, func(*views.ModelsData) {})
}

// admin serves GET /admin/models.
func (h *modelPages) admin(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	h.render(w, r, http.StatusOK, u.ID, true, func(*views.ModelsData) {})
}

func (h *modelPages) render(w http.ResponseWriter, r *http.Request, status int, user int64, admin bool, edit func(*views.ModelsData)) {
	d, err := h.data(r.Context(), user, admin)
	if err != nil {
		serverError(w, r, err)
		return
	}
	edit(&d)
	h.shell.page(w, r, status, "Models", views.ModelsPage(d))
}

// refuse shows the page again with what was refused.
func (h *modelPages) refuse(w http.ResponseWriter, r *http.Request, err error, typed string) {
	msg, ok := usererr.Message(err)
	if !ok {
		serverError(w, r, err)
		return
	}
	u, _ := currentUser(r)
	h.render(w, r, http.StatusUnprocessableEntity, u.ID, true, func(d *views.ModelsData) { d.Error, d.Pull = msg, typed })
}

// pull serves POST /admin/models/pull (fields name, server).
func (h *modelPages) pull(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	if !parseForm(w, r) {
		return
	}
	name := r.PostForm.Get("name")
	if _, err := h.manager.Pull(r.Context(), u.ID, name, r.PostForm.Get("server")); err != nil {
		h.refuse(w, r, err, name)
		return
	}
	redirect(w, r, "/admin/models")
}

// cancel serves POST /admin/models/pulls/{id}/cancel.
func (h *modelPages) cancel(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	if _, err := h.manager.Cancel(r.Context(), u.ID, id); err != nil {
		storeError(w, r, err)
		return
	}
	if isHTMX(r) {
		w.WriteHeader(http.StatusNoContent) // the pull's stream shows the outcome
		return
	}
	redirect(w, r, "/admin/models")
}

// events serves GET /admin/models/pulls/{id}/events: the pull's progress
// as it is, then each change, and its final row last.
func (h *modelPages) events(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	if _, err := h.store.ModelPull(r.Context(), u.ID, id); err != nil {
		storeError(w, r, err)
		return
	}
	ctx, es, done, ok := openUserStream(w, r, u.ID, h.streams, h.sessions, h.closing)
	if !ok {
		return
	}
	defer done()
	_ = h.manager.Follow(ctx, u.ID, id, func(p db.ModelPull) error {
		if p.Running() {
			return es.sendComponent(ctx, views.EventPull, views.PullState(p))
		}
		return es.sendComponent(ctx, views.EventDone, views.PullRow(p, true))
	}) // the browser reconnects when it needs to
}

// confirmDelete serves GET /admin/models/delete?name=: what deleting
// the model does, and the button that does it.
func (h *modelPages) confirmDelete(w http.ResponseWriter, r *http.Request) {
	name := queryText(r, "name")
	if name == "" {
		badRequest(w, r, "Say which model to delete.")
		return
	}
	h.shell.page(w, r, http.StatusOK, "Delete "+name, views.ModelDeletePage(name, h.manager.Servers(),
		strings.Join(h.models.Where(name), ", ")))
}

// delete serves POST /admin/models/delete (fields name, server, and
// confirm=yes from the confirmation page).
func (h *modelPages) delete(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	if !parseForm(w, r) {
		return
	}
	name := strings.TrimSpace(r.PostForm.Get("name"))
	if r.PostForm.Get("confirm") != "yes" || name == "" {
		badRequest(w, r, "Deleting a model needs its confirmation page: open Delete… on its row.")
		return
	}
	if err := h.manager.Delete(r.Context(), u.ID, name, r.PostForm.Get("server")); err != nil {
		h.refuse(w, r, err, "")
		return
	}
	h.sessions.Put(r.Context(), sessionFlash, "Deleted "+name+".")
	redirect(w, r, "/admin/models")
}

// unload serves POST /admin/models/unload (fields name, server).
func (h *modelPages) unload(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	name := strings.TrimSpace(r.PostForm.Get("name"))
	if name == "" {
		badRequest(w, r, "Say which model to unload.")
		return
	}
	if err := h.manager.Unload(r.Context(), name, r.PostForm.Get("server")); err != nil {
		h.refuse(w, r, err, "")
		return
	}
	h.sessions.Put(r.Context(), sessionFlash, "Unloaded "+name+".")
	redirect(w, r, "/admin/models")
}

// pullMetrics is what the metrics read of the pulls (chat.Pulls).
type pullMetrics interface {
	Running() int
	Ended(status string) int64
}

// registerPullMetrics exports the pulls of this instance:
// weft_model_pulls_running and weft_model_pulls_total by how they ended.
func registerPullMetrics(reg prometheus.Registerer, p pullMetrics) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weft_model_pulls_running", Help: "Model pulls running on this instance.",
	}, func() float64 { return float64(p.Running()) }))
	for _, st := range []string{db.PullCompleted, db.PullFailed, db.PullCancelled, db.PullInterrupted} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "weft_model_pulls_total", Help: "Model pulls of this instance that ended, by status.",
			ConstLabels: prometheus.Labels{"status": st},
		}, func() float64 { return float64(p.Ended(st)) }))
	}
}
