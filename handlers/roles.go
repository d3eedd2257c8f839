package handlers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"weft/db"
	"weft/views"
)

type roleStore interface {
	Roles(ctx context.Context, user int64) ([]db.Role, error)
	Role(ctx context.Context, user, id int64) (db.Role, error)
	CreateRole(ctx context.Context, user int64, in db.RoleInput) (db.Role, error)
	UpdateRole(ctx context.Context, user, id int64, in db.RoleInput) (db.Role, error)
	DeleteRole(ctx context.Context, user, id int64) (int, error)
	RoleUsage(ctx context.Context, user, id int64) (int, error)
}

// roles serves /roles: personas with a prompt and generation settings.
type roles struct {
	store roleStore
	shell *shell
}

func (h *roles) list(w http.ResponseWriter, r *http.Request) {
	h.renderList(w, r, http.StatusOK, views.RoleForm{}, "")
}

func (h *roles) renderList(w http.ResponseWriter, r *http.Request, status int, form views.RoleForm, errMsg string) {
	u, _ := currentUser(r)
	all, err := h.store.Roles(r.Context(), u.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.shell.page(w, r, status, "Roles", views.RolesPage(all, form, errMsg))
}

func (h *roles) create(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	if !parseForm(w, r) {
		return
	}
	form, in, msg := parseRole(r)
	if msg != "" {
		h.renderList(w, r, http.StatusUnprocessableEntity, form, msg)
		return
	}
	if _, err := h.store.CreateRole(r.Context(), u.ID, in); err != nil {
		if errors.Is(err, db.ErrConflict) {
			h.renderList(w, r, http.StatusUnprocessableEntity, form, fmt.Sprintf("You already have a role named %q.", in.Name))
			return
		}
		serverError(w, r, err)
		return
	}
	redirect(w, r, "/roles")
}

func (h *roles) show(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	role, err := h.store.Role(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	h.renderRole(w, r, http.StatusOK, role, views.RoleFormOf(role), "")
}

func (h *roles) renderRole(w http.ResponseWriter, r *http.Request, status int, role db.Role, form views.RoleForm, errMsg string) {
	u, _ := currentUser(r)
	n, err := h.store.RoleUsage(r.Context(), u.ID, role.ID)
	if err != nil {
		serverError(w, r, err)
		return
	}
	h.shell.page(w, r, status, "Role "+role.Name, views.RolePage(role, form, errMsg, n))
}

func (h *roles) update(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok || !parseForm(w, r) {
		return
	}
	role, err := h.store.Role(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	form, in, msg := parseRole(r)
	if msg != "" {
		h.renderRole(w, r, http.StatusUnprocessableEntity, role, form, msg)
		return
	}
	if _, err := h.store.UpdateRole(r.Context(), u.ID, id, in); err != nil {
		if errors.Is(err, db.ErrConflict) {
			h.renderRole(w, r, http.StatusUnprocessableEntity, role, form, fmt.Sprintf("You already have a role named %q.", in.Name))
			return
		}
		storeError(w, r, err)
		return
	}
	redirect(w, r, "/roles")
}

func (h *roles) delete(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	if _, err := h.store.DeleteRole(r.Context(), u.ID, id); err != nil {
		storeError(w, r, err)
		return
	}
	redirect(w, r, "/roles")
}

// parseRole reads a role form. msg says what is wrong (empty: nothing).
func parseRole(r *http.Request) (f views.RoleForm, in db.RoleInput, msg string) {
	get := func(k string) string { return strings.TrimSpace(r.PostForm.Get(k)) }
	f = views.RoleForm{Name: get("name"), Prompt: get("prompt"), Temperature: get("temperature"), TopP: get("top_p"),
		TopK: get("top_k"), RepeatPenalty: get("repeat_penalty"), Seed: get("seed"), NumCtx: get("num_ctx"),
		NumPredict: get("num_predict"), Stop: strings.ReplaceAll(r.PostForm.Get("stop"), "\r\n", "\n")}
	in.Name = strings.Join(strings.Fields(f.Name), " ")
	in.Prompt = f.Prompt
	switch {
	case in.Name == "" || utf8.RuneCountInString(in.Name) > 80:
		return f, in, "A role needs a name of 1 to 80 characters."
	case strings.ContainsAny(in.Name, "\n\r"):
		return f, in, "A role's name is one line."
	case utf8.RuneCountInString(in.Prompt) > maxPromptRunes:
		return f, in, "The prompt is longer than 20,000 characters."
	}
	if errs := parseParams(f, &in.Params); len(errs) > 0 {
		return f, in, "Not saved: " + strings.Join(errs, "; ") + "."
	}
	return f, in, ""
}

// parseParams reads a role form's generation settings (also a room
// agent's) into p, and lists what is wrong with them.
func parseParams(f views.RoleForm, p *db.RoleParams) []string {
	var errs []string
	floatParam(f.Temperature, "Temperature", 0, 2, &p.Temperature, &errs)
	floatParam(f.TopP, "Top P", 0, 1, &p.TopP, &errs)
	intParam(f.TopK, "Top K", 1, 1000, &p.TopK, &errs)
	floatParam(f.RepeatPenalty, "Repeat penalty", 0, 2, &p.RepeatPenalty, &errs)
	intParam(f.Seed, "Seed", math.MinInt32, math.MaxInt32, &p.Seed, &errs)
	intParam(f.NumCtx, "Context window", 256, 1<<20, &p.NumCtx, &errs)
	intParam(f.NumPredict, "Answer length", -2, 1<<20, &p.NumPredict, &errs)
	if p.NumPredict != nil && *p.NumPredict == 0 {
		errs = append(errs, "Answer length 0 would make every answer empty (use -1 for no limit, -2 to fill the context)")
	}
	for _, s := range strings.Split(f.Stop, "\n") {
		if s = strings.TrimSpace(s); s != "" {
			p.Stop = append(p.Stop, s)
		}
	}
	if len(p.Stop) > 8 {
		errs = append(errs, "at most 8 stop sequences")
	}
	for _, s := range p.Stop {
		if utf8.RuneCountInString(s) > 100 {
			errs = append(errs, "a stop sequence has at most 100 characters")
			break
		}
	}
	return errs
}

func floatParam(s, name string, lo, hi float64, dst **float64, errs *[]string) {
	if s == "" {
		return
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", "."), 64)
	if err != nil || math.IsNaN(v) || v < lo || v > hi {
		*errs = append(*errs, fmt.Sprintf("%s must be a number from %g to %g", name, lo, hi))
		return
	}
	*dst = &v
}

func intParam(s, name string, lo, hi int, dst **int, errs *[]string) {
	if s == "" {
		return
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		*errs = append(*errs, fmt.Sprintf("%s must be a whole number from %d to %d", name, lo, hi))
		return
	}
	*dst = &v
}
