package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"weft/db"
)

// contentSecurityPolicy allows scripts, styles and connections from this
// origin only: no inline script, no plugins, no framing.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"media-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"

// securityHeaders sets the headers every response carries.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}

// capBody limits every request body before anything parses it. Routes that
// accept uploads raise the cap for themselves.
func capBody(limit int64) func(http.Handler) http.Handler {
	return capBodyFiles(limit, limit)
}

// capBodyFiles is capBody with a larger cap for multipart bodies (forms
// carrying files).
func capBodyFiles(limit, withFiles int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			limit := limit
			if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
				limit = withFiles
			}
			if r.ContentLength > limit {
				errorPage(w, r, http.StatusRequestEntityTooLarge, "That request is too large.")
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			next.ServeHTTP(w, r)
		})
	}
}

// noDeadline clears a write deadline.
var noDeadline time.Time

// writeDeadline bounds how long a normal response may take to write. The
// event streams are mounted outside it: they stay open for as long as a run.
func writeDeadline(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
			next.ServeHTTP(w, r)
		})
	}
}

// statusRecorder remembers the status and size of a response for logs and
// metrics. Unwrap keeps http.ResponseController (flush, deadlines) working.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush lets streaming handlers flush through the recorder.
func (s *statusRecorder) Flush() { _ = http.NewResponseController(s.ResponseWriter).Flush() }

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weft_http_requests_total", Help: "HTTP requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "weft_http_request_duration_seconds", Help: "HTTP request duration by route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// observe logs every request (slog, with the route pattern and the user)
// and counts it in the metrics. It also turns a panic into a clean 500.
func (m *metrics) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		var uid int64
		r = r.WithContext(context.WithValue(r.Context(), logUserKey{}, &uid))
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				slog.ErrorContext(r.Context(), "panic", "err", fmt.Sprint(p), "stack", string(debug.Stack()))
				if rec.status == 0 {
					serverError(rec, r, fmt.Errorf("panic: %v", p))
				}
			}
			route := chi.RouteContext(r.Context()).RoutePattern()
			if route == "" {
				route = "unmatched"
			}
			if rec.status == 0 {
				rec.status = http.StatusOK
			}
			d := time.Since(start)
			// Labels come from fixed sets only: the route table's patterns,
			// known methods and status codes Weft itself writes.
			method := metricMethod(r.Method)
			m.requests.WithLabelValues(route, method, strconv.Itoa(rec.status)).Inc()
			m.duration.WithLabelValues(route, method).Observe(d.Seconds())
			slog.LogAttrs(r.Context(), slog.LevelInfo, "request",
				slog.String("method", metricMethod(r.Method)), slog.String("path", logPath(r.URL.Path)), slog.String("route", route),
				slog.Int("status", rec.status), slog.Int("bytes", rec.bytes), slog.Duration("duration", d),
				slog.Int64("user", uid))
		}()
		next.ServeHTTP(rec, r)
	})
}

type logUserKey struct{}
type userKey struct{}

// withUser loads the signed-in user, if any, into the request context. A
// session pointing at a deleted or disabled account, or no longer the
// account's (ended: user_sessions), is destroyed.
func (a *auth) withUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(context.WithValue(r.Context(), userAgentKey{}, r.UserAgent()))
		id := a.sessions.GetInt64(r.Context(), sessionUserID)
		if id != 0 {
			u, mapped, err := a.store.SessionUser(r.Context(), id, a.sessions.Token(r.Context()))
			switch {
			case err == nil && !u.Disabled && mapped:
				if p, ok := r.Context().Value(logUserKey{}).(*int64); ok {
					*p = u.ID
				}
				r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
				a.touch(r, u.ID)
			case err == nil || errors.Is(err, db.ErrNotFound):
				a.streams.endSession(a.sessions.Token(r.Context()))
				_ = a.sessions.Destroy(r.Context())
			default:
				serverError(w, r, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// requireUser sends anonymous visitors to the sign-in page.
func requireUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := currentUser(r); !ok {
			redirect(w, r, "/login")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireAdmin refuses members.
func requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, _ := currentUser(r); !u.IsAdmin() {
			errorPage(w, r, http.StatusForbidden, "Only an administrator can do that.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func currentUser(r *http.Request) (db.User, bool) {
	u, ok := r.Context().Value(userKey{}).(db.User)
	return u, ok
}
