package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/ollama/ollama/api"
	"github.com/prometheus/client_golang/prometheus"

	"weft/chat"
	"weft/db"
)

// The OpenAI-compatible API (issue 19): /v1/models, /v1/chat/completions
// and /v1/embeddings, for programs holding a personal API token. It is
// its own route group: a Bearer token and nothing else (no session is
// loaded, so the session cookie is ignored and no cross-site request can
// act with it), capped bodies, answers in OpenAI's JSON and error shapes.
// Bearer tokens are read here only; every HTML route ignores them.

// apiTokenPrefix starts every token, so that secret scanners can find
// leaked ones.
const apiTokenPrefix = "weft_"

// apiTokenLen is the length of a token: the prefix and 32 random bytes in
// unpadded base64url.
const apiTokenLen = len(apiTokenPrefix) + 43

type apiStore interface {
	UseAPIToken(ctx context.Context, sha []byte, now time.Time) (db.TokenUse, error)
	Workspace(ctx context.Context, user, id int64) (db.Workspace, error)
	DefaultWorkspace(ctx context.Context, user int64) (db.Workspace, error)
	KB(ctx context.Context, user, id int64) (db.KnowledgeBase, error)
	ImportThread(ctx context.Context, user, workspace int64, in db.ImportedThread) (db.Thread, error)
}

type apiRuntime interface {
	APISlot(ctx context.Context, user int64) (_ context.Context, release func(), err error)
	Complete(ctx context.Context, c chat.Completion, delta func(api.ChatResponse) error) (chat.Completed, error)
	Embed(ctx context.Context, model string, texts []string) (*api.EmbedResponse, error)
	DescribeFailure(err error, model string) string
}

type apiModels interface {
	List(ctx context.Context) ([]chat.Model, error)
	Supports(ctx context.Context, name, capability string) (has, known bool)
}

// apiEndpoints serves /v1.
type apiEndpoints struct {
	store  apiStore
	rt     apiRuntime
	models apiModels
	now    func() time.Time
	rate   int // requests per minute per token; negative: no limit
	// writeTimeout bounds each write of a streamed answer: the model waits
	// on the caller, so a caller that stops reading must not hold it.
	writeTimeout time.Duration
	publicURL    *url.URL
	requests     *prometheus.CounterVec // by route and status
	tokens       *prometheus.CounterVec // prompt and completion tokens
}

func newAPIEndpoints(cfg Config, store apiStore, rt *chat.Runtime, reg prometheus.Registerer) *apiEndpoints {
	a := &apiEndpoints{store: store, rt: rt, models: rt.Models(), now: cfg.Now, rate: cfg.APIRate, writeTimeout: cfg.APIWriteTimeout, publicURL: cfg.PublicURL,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weft_api_requests_total", Help: "Requests of the OpenAI-compatible API by route and status code.",
		}, []string{"route", "code"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weft_api_tokens_total", Help: "Model tokens of API answers: prompt and completion.",
		}, []string{"kind"}),
	}
	reg.MustRegister(a.requests, a.tokens)
	return a
}

type tokenUseKey struct{}

// tokenUse is the request's token and user (set by bearer).
func tokenUse(r *http.Request) db.TokenUse {
	u, _ := r.Context().Value(tokenUseKey{}).(db.TokenUse)
	return u
}

// apiFailure is an error in OpenAI's shape.
type apiFailure struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// apiError writes an error in OpenAI's shape: {"error": {"message", "type",
// "param", "code"}}.
func apiError(w http.ResponseWriter, status int, typ, code, msg string) {
	f := apiFailure{Message: msg, Type: typ}
	if code != "" {
		f.Code = &code
	}
	writeAPIJSON(w, status, map[string]apiFailure{"error": f})
}

func apiBadRequest(w http.ResponseWriter, msg string) {
	apiError(w, http.StatusBadRequest, "invalid_request_error", "", msg)
}

func apiNotFound(w http.ResponseWriter, code, msg string) {
	apiError(w, http.StatusNotFound, "invalid_request_error", code, msg)
}

func apiServerError(w http.ResponseWriter, r *http.Request, err error) {
	slog.ErrorContext(r.Context(), "api", "path", r.URL.Path, "err", err)
	apiError(w, http.StatusInternalServerError, "server_error", "", "The server failed to answer; its log has the details.")
}

func writeAPIJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"The answer could not be encoded.","type":"server_error","param":null,"code":null}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// observe counts the API's requests by route pattern (or "unmatched")
// and status, refusals included.
func (a *apiEndpoints) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" && rc.RoutePattern() != "/v1/*" {
			route = rc.RoutePattern()
		}
		a.requests.WithLabelValues(route, strconv.Itoa(rec.status)).Inc()
	})
}

// bearer authenticates a request by its API token: unknown, revoked,
// expired or a disabled user's → 401 with WWW-Authenticate; over the
// token's rate → 429 with Retry-After; without scope → 403. The scope a
// request needs is read for GET and chat for anything else; a handler asks
// for more (kb) itself.
func (a *apiEndpoints) bearer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		tok = strings.TrimSpace(tok)
		if !strings.EqualFold(scheme, "Bearer") || tok == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="weft"`)
			apiError(w, http.StatusUnauthorized, "invalid_request_error", "missing_api_key",
				"This API needs an API token: send it as \"Authorization: Bearer weft_…\". Make one on /settings.")
			return
		}
		var use db.TokenUse
		err := db.ErrTokenRefused
		if len(tok) == apiTokenLen && strings.HasPrefix(tok, apiTokenPrefix) {
			sum := sha256.Sum256([]byte(tok))
			use, err = a.store.UseAPIToken(r.Context(), sum[:], a.now())
		}
		if errors.Is(err, db.ErrTokenRefused) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="weft", error="invalid_token"`)
			apiError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
				"This API token is not valid: it is unknown, revoked or expired, or its account is disabled.")
			return
		}
		if err != nil {
			apiServerError(w, r, err)
			return
		}
		if p, ok := r.Context().Value(logUserKey{}).(*int64); ok {
			*p = use.User.ID
		}
		if a.rate > 0 && use.WindowCount > a.rate {
			wait := math.Ceil(use.WindowEnd.Sub(a.now()).Seconds())
			w.Header().Set("Retry-After", strconv.Itoa(max(int(wait), 1)))
			apiError(w, http.StatusTooManyRequests, "requests", "rate_limit_exceeded",
				"This API token made more than "+strconv.Itoa(a.rate)+" requests in a minute; retry after the time in Retry-After.")
			return
		}
		need := db.ScopeChat
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			need = db.ScopeRead
		}
		if !use.Token.Has(need) {
			apiError(w, http.StatusForbidden, "permission_error", "insufficient_scope",
				"This API token does not have the "+need+" scope; make one with it on /settings.")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenUseKey{}, use)))
	})
}

// apiNotFoundRoute answers unknown /v1 paths in OpenAI's shape.
func apiNotFoundRoute(w http.ResponseWriter, r *http.Request) {
	apiNotFound(w, "unknown_url", "There is no "+r.Method+" "+r.URL.Path+" in this API.")
}

// decodeAPIBody reads a JSON body (already capped by the route group).
func decodeAPIBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			apiError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "", "The request body is too large.")
			return false
		}
		apiBadRequest(w, "The request body is not valid JSON for this endpoint: "+err.Error())
		return false
	}
	return true
}
