package handlers

import (
	"net/http"
	"strconv"
	"strings"

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

// queryText reads a query parameter as text for the database: trimmed,
// bytes that are not UTF-8 and NULs dropped (PostgreSQL refuses both in
// text, which would otherwise be a server error for a hand-typed URL).
func queryText(r *http.Request, name string) string {
	return cleanText(r.URL.Query().Get(name))
}

// cleanText is s trimmed, without invalid UTF-8 or NUL bytes.
func cleanText(s string) string {
	return strings.TrimSpace(strings.ReplaceAll(strings.ToValidUTF8(s, ""), "\x00", ""))
}
