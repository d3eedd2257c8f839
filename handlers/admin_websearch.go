package handlers

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"weft/internal/usererr"
	"weft/rag"
	"weft/views"
)

// webSearchAdmin is the search service's settings (implemented by
// rag.Service).
type webSearchAdmin interface {
	WebSearchSettings(ctx context.Context) (rag.WebSearchSettings, error)
	SaveWebSearch(ctx context.Context, w rag.WebSearchSettings) error
}

// webSearchView is /admin's web search section.
func webSearchView(ctx context.Context, ws webSearchAdmin, saved bool) (views.WebSearchSettings, error) {
	w, err := ws.WebSearchSettings(ctx)
	if err != nil {
		return views.WebSearchSettings{}, err
	}
	return views.WebSearchSettings{Kind: w.Kind, URL: w.URL, KeySet: w.Key != "", Results: w.Results, Pages: w.Pages,
		Saved: saved, Off: rag.WebSearchOff}, nil
}

// setWebSearch serves POST /admin/web-search: the search service web
// search uses (an empty URL turns it off). The key is kept when the field
// is left empty, and removed with clear_key.
func (h *admin) setWebSearch(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	old, err := h.web.WebSearchSettings(r.Context())
	if err != nil {
		serverError(w, r, err)
		return
	}
	results, err1 := strconv.Atoi(strings.TrimSpace(r.PostForm.Get("results")))
	pages, err2 := strconv.Atoi(strings.TrimSpace(r.PostForm.Get("pages")))
	if err1 != nil || err2 != nil {
		badRequest(w, r, "Results per search and pages read must be whole numbers; nothing was saved.")
		return
	}
	set := rag.WebSearchSettings{Kind: r.PostForm.Get("kind"), URL: r.PostForm.Get("url"), Key: old.Key, Results: results, Pages: pages}
	if k := strings.TrimSpace(r.PostForm.Get("key")); k != "" {
		set.Key = k
	}
	if r.PostForm.Get("clear_key") == "on" {
		set.Key = ""
	}
	if err := h.web.SaveWebSearch(r.Context(), set); err != nil {
		if msg, ok := usererr.Message(err); ok {
			badRequest(w, r, msg+" Nothing was saved.")
			return
		}
		serverError(w, r, err)
		return
	}
	redirect(w, r, "/admin?web-saved#web-search")
}
