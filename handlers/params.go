package handlers

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
)

// pathID reads a positive integer id from the route; anything else is a 404
// (answered here).
func pathID(w http.ResponseWriter, r *http.Request, name string) (int64, bool) {
	id, err := strconv.ParseInt(chi.URLParam(r, name), 10, 64)
	if err != nil || id <= 0 {
		notFound(w, r)
		return 0, false
	}
	return id, true
}

// formBool reads a "true"/"false" form field.
func formBool(r *http.Request, name string) (bool, bool) {
	b, err := strconv.ParseBool(r.PostForm.Get(name))
	return b, err == nil
}
