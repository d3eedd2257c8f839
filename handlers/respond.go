package handlers

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/a-h/templ"

	"weft/db"
	"weft/internal/usererr"
	"weft/views"
)

// HX request and response headers used by Weft (htmx 2).
const (
	hxRequest  = "HX-Request"
	hxRedirect = "HX-Redirect"
)

// isHTMX reports whether the request came from htmx, which decides whether
// a fragment or a whole page is rendered, and how redirects are sent. It is
// the only place that reads the HX-Request header.
func isHTMX(r *http.Request) bool { return r.Header.Get(hxRequest) == "true" }

// render writes a component with the given status. It renders into a buffer
// first so that a failed render becomes a clean 500 instead of half a page.
func render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		serverError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// redirect sends the browser to url after a successful form post: a 303 for
// plain forms, HX-Redirect for htmx requests.
func redirect(w http.ResponseWriter, r *http.Request, url string) {
	if isHTMX(r) {
		w.Header().Set(hxRedirect, url)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(w, r, url, http.StatusSeeOther)
}

func errorPage(w http.ResponseWriter, r *http.Request, code int, msg string) {
	render(w, r, code, views.Page(http.StatusText(code), views.ErrorPage(code, msg)))
}

// genericFailure is shown for an error that carries no message of its own.
const genericFailure = "Something went wrong on our side. It has been logged; please try again."

// serverError logs err with the request's context and shows a message that
// never carries internals: err's own message for the user when it carries
// one (usererr), else a generic one.
func serverError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		// The client went away: there is nobody to answer and nothing broke.
		slog.DebugContext(r.Context(), "request abandoned", "path", logPath(r.URL.Path), "err", err)
		return
	}
	slog.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", logPath(r.URL.Path), "err", err)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	_ = views.Page("Error", views.ErrorPage(http.StatusInternalServerError,
		usererr.Or(err, genericFailure))).Render(r.Context(), w)
}

// logPath is a request's path as the logs show it. A share link's token is
// its only credential, so a log keeps no more of it than its hint (the
// first characters, which its owner sees in their list of links). A
// password-reset or invite link's token is too (whoever has it sets the
// account's password, or makes an account), and nothing shows a hint of
// it: a log keeps none of it.
func logPath(p string) string {
	for _, prefix := range []string{"/reset/", "/invite/"} {
		if rest, ok := strings.CutPrefix(p, prefix); ok && rest != "" {
			return prefix + "…"
		}
	}
	rest, ok := strings.CutPrefix(p, "/s/")
	if !ok {
		return p
	}
	token, tail, more := strings.Cut(rest, "/")
	if len(token) > shareHintLen {
		token = token[:shareHintLen] + "…"
	}
	if more {
		tail = "/" + tail
	}
	return "/s/" + token + tail
}

func notFound(w http.ResponseWriter, r *http.Request) {
	errorPage(w, r, http.StatusNotFound, "There is nothing here, or it is not yours to see.")
}

// badRequest refuses the request with msg, written by the handler for the
// user (never an error's text).
func badRequest(w http.ResponseWriter, r *http.Request, msg string) {
	errorPage(w, r, http.StatusBadRequest, msg)
}

// storeError maps a store error to the right response: a missing or foreign
// object is a 404, anything else a 500.
func storeError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, db.ErrNotFound) {
		notFound(w, r)
		return
	}
	serverError(w, r, err)
}

// parseForm parses a (capped) form body and answers the request itself when
// that fails: 413 for a body over the cap, 400 otherwise.
func parseForm(w http.ResponseWriter, r *http.Request) bool {
	var err error
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		// The composer sends files; parts over 8 MB wait on disk (the body
		// is capped before this).
		err = r.ParseMultipartForm(8 << 20)
	} else {
		err = r.ParseForm()
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			errorPage(w, r, http.StatusRequestEntityTooLarge, "That request is too large.")
			return false
		}
		badRequest(w, r, "The form could not be read.")
		return false
	}
	return true
}
