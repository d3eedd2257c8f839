// Package handlers is Weft's HTTP layer: the one route table, the middleware
// (logging and metrics, security headers, cross-origin protection, body caps,
// sessions, authentication) and one small handler per screen or action.
// Handlers parse, authorize, call and render; they hold no SQL and no model
// logic, and reach the database only through small interfaces declared here.
package handlers

import (
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"weft/agent"
	"weft/chat"
	"weft/db"
	"weft/media"
	"weft/rag"
	"weft/static"
)

// Config is what the HTTP layer needs to know about the deployment.
type Config struct {
	SecureCookies bool  // set the session cookie's Secure flag (served over TLS)
	MaxBodyBytes  int64 // cap for ordinary request bodies
	LoginLimit    LoginLimit
	// MaxUploadBytes caps one knowledge base upload request (many files;
	// each file also has its own limit). Default 512 MB.
	MaxUploadBytes int64
	EmbedModel     string // WEFT_EMBED_MODEL: preselected for new knowledge bases

	// PublicURL is WEFT_PUBLIC_URL: requests for another Host are refused,
	// and an https URL makes the session cookie Secure and __Host- named
	// (TLS may end at a proxy). Nil: ListenAddr and the loopback names.
	PublicURL  *url.URL
	ListenAddr string // WEFT_ADDR, for the Host check without a public URL
	// MetricsElsewhere leaves /metrics off this handler: it is served by
	// Metrics on WEFT_METRICS_ADDR. MetricsToken (WEFT_METRICS_TOKEN), when
	// set, is the Bearer token /metrics requires wherever it is served.
	MetricsElsewhere bool
	MetricsToken     string
	// MaxStreamsPerUser caps one user's open event streams on this
	// instance (WEFT_MAX_STREAMS_PER_USER; default 20).
	MaxStreamsPerUser int
	// SignupLimit is WEFT_SIGNUP_LIMIT: sign-ups per client address per
	// hour, counted in Postgres; 0 = no limit.
	SignupLimit int
	// HashSlots and HashWait bound password hashing: at most HashSlots
	// argon2id computations at once (default GOMAXPROCS, at least 2), each
	// caller queueing at most HashWait (default 5 s) before a 503.
	HashSlots int
	HashWait  time.Duration
	// StreamSweep is how often open event streams are checked against the
	// session table, so a logout on another instance ends them (10 s).
	StreamSweep time.Duration
	// UserMaxBytes is what one user may store: their attachments' distinct
	// files plus their knowledge-base documents. Default 1 GiB.
	UserMaxBytes int64
}

// sessionCookieName is the session cookie's name over plain HTTP; with an
// https public URL it carries the __Host- prefix (Secure, Path=/, no
// Domain: no subdomain can set or shadow it).
const sessionCookieName = "weft_session"

// Server is Weft's HTTP handler.
type Server struct {
	http.Handler
	router       chi.Routes
	metrics      http.Handler
	streams      *streamRegistry
	hashes       *hashPool
	sessionStore *pgxstore.PostgresStore
	closing      chan struct{}
	closeOnce    sync.Once
}

// StartShutdown ends the open event streams (browsers reconnect, to another
// instance if there is one) so that the HTTP server can drain.
func (s *Server) StartShutdown() { s.closeOnce.Do(func() { close(s.closing) }) }

// Routes lists every "METHOD pattern" of the route table (the
// authorization test checks that it covers them all).
func (s *Server) Routes() []string {
	var out []string
	_ = chi.Walk(s.router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		out = append(out, method+" "+route)
		return nil
	})
	return out
}

// Metrics serves /metrics (behind the metrics token, when one is set), for
// the separate listener of WEFT_METRICS_ADDR.
func (s *Server) Metrics() http.Handler { return s.metrics }

// PasswordHashes reports how many password hashes and checks ran, and the
// most that ever ran at once (a test hook for the bounded pool).
func (s *Server) PasswordHashes() (done, peak int64) {
	return s.hashes.done.Load(), s.hashes.peak.Load()
}

// OpenStreams counts the event streams open on this server (a test hook).
func (s *Server) OpenStreams() int { return s.streams.count() }

// Close stops the background work the server started (session clean-up).
func (s *Server) Close() {
	s.StartShutdown()
	s.sessionStore.StopCleanup()
}

// New wires the route table.
func New(cfg Config, store *db.DB, rt *chat.Runtime, kb *rag.Service, ag *agent.Agent, med *media.Service) *Server {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxUploadBytes == 0 {
		cfg.MaxUploadBytes = 512 << 20
	}
	if cfg.UserMaxBytes == 0 {
		cfg.UserMaxBytes = 1 << 30
	}
	if cfg.LoginLimit.Window == 0 {
		cfg.LoginLimit = LoginLimit{PerIP: 50, PerAccount: 5, Window: 15 * time.Minute}
	}
	sessionStore := pgxstore.NewWithCleanupInterval(store.Pool, 10*time.Minute)
	sessions := scs.New()
	sessions.Store = sessionStore
	// An absolute lifetime, no idle timeout: with IdleTimeout scs marks
	// every loaded session modified and writes it back at the end of each
	// request, so of two concurrent requests the slower one overwrites what
	// the other stored (a flash put by a command was lost to a parallel
	// fragment request).
	sessions.Lifetime = 30 * 24 * time.Hour
	sessions.Cookie.Name = sessionCookieName
	sessions.Cookie.HttpOnly = true
	sessions.Cookie.SameSite = http.SameSiteLaxMode
	sessions.Cookie.Secure = cfg.SecureCookies
	sessions.Cookie.Path = "/"
	if cfg.PublicURL != nil && cfg.PublicURL.Scheme == "https" {
		sessions.Cookie.Secure = true
		sessions.Cookie.Name = "__Host-" + sessionCookieName
	}
	if cfg.MaxStreamsPerUser <= 0 {
		cfg.MaxStreamsPerUser = 20
	}
	streams := newStreamRegistry(cfg.MaxStreamsPerUser)
	if cfg.StreamSweep == 0 {
		cfg.StreamSweep = 10 * time.Second
	}
	sessions.ErrorFunc = serverError

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := newMetrics(reg)

	hashes := newHashPool(cfg.HashSlots, cfg.HashWait)
	a := &auth{store: store, sessions: sessions, limit: cfg.LoginLimit, signupLimit: cfg.SignupLimit,
		hashes: hashes, streams: streams}
	closing := make(chan struct{})
	sh := &shell{store: store, sessions: sessions, models: rt.Models()}
	hm := &home{shell: sh, store: store, media: med}
	th := &threads{store: store, shell: sh, home: hm, rt: rt, media: med}
	rl := &roles{store: store, shell: sh}
	st := &settings{store: store, shell: sh}
	kh := &kbs{store: store, rag: kb, models: rt.Models(), shell: sh, embedModel: cfg.EmbedModel, maxBytes: cfg.UserMaxBytes}
	rn := &runs{store: store, models: rt.Models(), rt: rt, closing: closing, streams: streams, sessions: sessions}
	ms := &messages{store: store, rt: rt, media: med}
	mg := &manage{store: store, shell: sh}
	ws := &workspaces{store: store, shell: sh, sessions: sessions}
	ad := &admin{store: store, shell: sh}
	ap := &agentPages{store: store, ag: ag, models: rt.Models(), shell: sh, rt: rt}
	sh.agent = ap
	mp := &mediaPages{store: store, ms: med, blobs: med.Blobs, shell: sh}
	ad.media = med

	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		errorPage(w, r, http.StatusForbidden, "This request came from another site and was refused.")
	}))

	// The front door, in order: unknown methods are refused before any
	// work, then foreign Host names; only then logging, metrics, headers.
	r := chi.NewRouter()
	r.Use(refuseUnknownMethods, checkHost(newHostPolicy(cfg.PublicURL, cfg.ListenAddr)), m.observe, securityHeaders, cop.Handler)
	r.NotFound(notFound)
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		errorPage(w, r, http.StatusMethodNotAllowed, "That action is not available here.")
	})

	// Operations: no session, no database work beyond a ping.
	r.Get("/healthz", healthz)
	r.Get("/readyz", readyz(store))
	metricsHandler := requireBearer(cfg.MetricsToken, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if !cfg.MetricsElsewhere {
		r.Method(http.MethodGet, "/metrics", metricsHandler)
	}
	r.Get("/static/*", http.StripPrefix("/static/", staticFiles()).ServeHTTP)

	// Pages and actions: capped bodies, sessions, a signed-in user, a write
	// deadline.
	r.Group(func(r chi.Router) {
		r.Use(capBody(cfg.MaxBodyBytes), writeDeadline(30*time.Second), sessions.LoadAndSave, a.withUser)

		r.Get("/register", a.showRegister)
		r.Post("/register", a.register)
		r.Get("/login", a.showLogin)
		r.Post("/login", a.login)
		r.Post("/logout", a.logout)

		r.Group(func(r chi.Router) {
			r.Use(requireUser)
			r.Get("/", hm.show)

			r.Get("/t/{id}", th.show)
			r.Post("/t/{id}/rename", th.rename)
			r.Post("/t/{id}/pin", th.pin)
			r.Post("/t/{id}/archive", th.archive)
			r.Post("/t/{id}/delete", th.delete)
			r.Get("/t/{id}/title", th.title)
			r.Get("/t/{id}/history", th.history)
			r.Get("/t/{id}/context", th.context)
			r.Post("/t/{id}/settings", th.settings)
			r.Post("/m/{id}/retry", ms.retry)
			r.Post("/m/{id}/edit", ms.edit)
			r.Post("/m/{id}/continue", ms.continueAnswer)
			r.Post("/m/{id}/select", ms.selectBranch)
			r.Post("/m/{id}/fork", ms.fork)
			r.Post("/m/{id}/delete", ms.delete)
			r.Post("/runs/{id}/cancel", rn.cancel)

			r.Post("/t/{id}/move", mg.move)
			r.Get("/t/{id}/export.{format}", mg.export)
			r.Get("/search", mg.search)
			r.Get("/archived", mg.archived)
			r.Get("/import", mg.importPage)

			r.Get("/w/{id}/threads", sh.sidebarPage)
			r.Get("/workspaces", ws.list)
			r.Post("/workspaces", ws.create)
			r.Post("/workspaces/switch", ws.switchTo)
			r.Post("/workspaces/{id}/rename", ws.rename)
			r.Post("/workspaces/{id}/archive", ws.archive)

			r.Get("/roles", rl.list)
			r.Post("/roles", rl.create)
			r.Get("/roles/{id}", rl.show)
			r.Post("/roles/{id}", rl.update)
			r.Post("/roles/{id}/delete", rl.delete)
			r.Get("/kb", kh.list)
			r.Post("/kb", kh.create)
			r.Get("/kb/{id}", kh.show)
			r.Get("/kb/{id}/documents", kh.documents)
			r.Post("/kb/{id}/rename", kh.rename)
			r.Post("/kb/{id}/settings", kh.settings)
			r.Post("/kb/{id}/model", kh.model)
			r.Post("/kb/{id}/delete", kh.delete)
			r.Post("/kb/{id}/documents/{doc}/delete", kh.deleteDocument)
			r.Post("/kb/{id}/documents/{doc}/retry", kh.retryDocument)
			r.Get("/m/{id}/sources/{n}", kh.source)
			r.Post("/t/{id}/kbs", th.setKBs)
			r.Get("/tools", ap.settings)
			r.Post("/tools", ap.saveSettings)
			r.Post("/steps/{id}/decide", ap.decide)
			r.Post("/steps/{id}/answer", ap.answer)
			r.Post("/runs/{id}/resume", ap.resume)
			r.Get("/t/{id}/debug", ap.debug)
			r.Get("/settings", st.show)
			r.Post("/settings/instructions", st.setInstructions)

			r.Get("/attachments/{id}", mp.attachment)
			r.Get("/attachments/{id}/thumb", mp.attachmentThumb)
			r.Get("/media/{id}", mp.mediaFile(false))
			r.Get("/media/{id}/thumb", mp.mediaFile(true))
			r.Get("/media/{id}/card", mp.mediaCard)
			r.Post("/m/{id}/speak", mp.speak)
			r.Post("/t/{id}/media", mp.threadMedia)
			r.With(requireAdmin).Post("/admin/media", mp.adminMedia)

			r.With(requireAdmin).Get("/admin", ad.show)
			r.With(requireAdmin).Post("/admin/signup", ad.setSignup)
			r.With(requireAdmin).Post("/admin/system-prompt", ad.setSystemPrompt)
		})
	})
	// Sends: the composer's files make them larger than other forms.
	r.Group(func(r chi.Router) {
		lim := med.Limits()
		r.Use(capBodyFiles(cfg.MaxBodyBytes, int64(lim.MaxFiles)*lim.MaxFileBytes+cfg.MaxBodyBytes+1<<20), writeDeadline(2*time.Minute),
			sessions.LoadAndSave, a.withUser, requireUser)
		r.Post("/t", th.create)
		r.Post("/t/{id}/messages", th.append)
	})
	// Uploads: the same, with a larger cap of their own.
	r.Group(func(r chi.Router) {
		r.Use(capBody(chat.MaxImportBytes+1<<20), writeDeadline(2*time.Minute), sessions.LoadAndSave, a.withUser, requireUser)
		r.Post("/import", mg.importThread)
	})
	// Knowledge base uploads: many files at once, each up to the file limit.
	r.Group(func(r chi.Router) {
		r.Use(capBody(cfg.MaxUploadBytes), writeDeadline(10*time.Minute), sessions.LoadAndSave, a.withUser, requireUser)
		r.Post("/kb/{id}/upload", kh.upload)
	})
	// Event streams: signed in, but no write deadline (they last a run).
	r.Group(func(r chi.Router) {
		r.Use(capBody(cfg.MaxBodyBytes), sessions.LoadAndSave, a.withUser, requireUser)
		r.Get("/runs/{id}/events", rn.events)
	})

	go streams.sweep(store.LiveSessions, cfg.StreamSweep, closing)
	return &Server{Handler: r, router: r, metrics: metricsHandler, streams: streams, hashes: hashes, sessionStore: sessionStore, closing: closing}
}

// staticFiles serves the embedded files. They are small and change with the
// binary, so browsers revalidate them.
func staticFiles() http.Handler {
	fs := http.FileServerFS(static.FS)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		fs.ServeHTTP(w, r)
	})
}
