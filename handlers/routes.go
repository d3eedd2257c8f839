// Package handlers is Weft's HTTP layer: the one route table, the middleware
// (logging and metrics, security headers, cross-origin protection, body caps,
// sessions, authentication) and one small handler per screen or action.
// Handlers parse, authorize, call and render; they hold no SQL and no model
// logic, and reach the database only through small interfaces declared here.
package handlers

import (
	"context"
	"log/slog"
	"net/http"
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

// sessionCookieName is the session cookie's name over plain HTTP; with an
// https public URL it carries the __Host- prefix (Secure, Path=/, no
// Domain: no subdomain can set or shadow it).
const sessionCookieName = "weft_session"

// Server is Weft's HTTP handler.
type Server struct {
	http.Handler
	router    chi.Routes
	metrics   http.Handler
	streams   *streamRegistry
	hashes    *hashPool
	closing   chan struct{}
	closeOnce sync.Once
	sso       *ssoPages
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
func (s *Server) Close() { s.StartShutdown() }

// New builds the HTTP layer: the sessions, the metrics, every handler
// (each once, with the dependencies it uses) and the route table.
func New(cfg Config, store *db.DB, rt *chat.Runtime, kb *rag.Service, ag *agent.Agent, med *media.Service) *Server {
	cfg = cfg.withDefaults()
	// The store's own clean-up goroutine is off: it is started and stopped
	// without synchronisation (a data race when a server closes right
	// after it starts); cleanSessions does its work.
	sessionStore := pgxstore.NewWithCleanupInterval(store.Pool, 0)
	sessions := newSessions(cfg, sessionStore)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if pl := rt.Pulls(); pl != nil {
		registerPullMetrics(reg, pl)
	}
	metricsHandler := requireBearer(cfg.MetricsToken, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	shared := sharedState{
		sessions: sessions,
		streams:  newStreamRegistry(cfg.MaxStreamsPerUser),
		hashes:   newHashPool(cfg.HashSlots, cfg.HashWait),
		closing:  make(chan struct{}),
	}
	e := newEndpoints(cfg, store, shared, rt, kb, ag, med)
	e.api = newAPIEndpoints(cfg, store, rt, reg)
	r := e.routes(newMetrics(reg), metricsHandler)
	go shared.streams.sweep(store.LiveSessions, cfg.StreamSweep, shared.closing)
	go cleanSessions(store.DeleteExpiredSessions, sessionCleanup, shared.closing)
	return &Server{Handler: r, router: r, metrics: metricsHandler, streams: shared.streams, hashes: shared.hashes,
		closing: shared.closing, sso: e.sso}
}

// sessionCleanup is how often expired sessions are deleted.
const sessionCleanup = 10 * time.Minute

// cleanSessions deletes the expired sessions every interval until stop.
func cleanSessions(deleteExpired func(context.Context) error, every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := deleteExpired(ctx)
		cancel()
		if err != nil {
			slog.Warn("session clean-up", "err", err)
		}
	}
}

// newSessions is the session manager over the sessions table.
func newSessions(cfg Config, store *pgxstore.PostgresStore) *scs.SessionManager {
	sessions := scs.New()
	sessions.Store = store
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
	sessions.ErrorFunc = serverError
	return sessions
}

// sharedState is what several handlers hold in common: the sessions, the
// open event streams (ended at logout and at shutdown), the password
// hashing pool and the shutdown signal.
type sharedState struct {
	sessions *scs.SessionManager
	streams  *streamRegistry
	hashes   *hashPool
	closing  chan struct{}
}

// endpoints are the route table's handlers and what its middleware needs.
type endpoints struct {
	cfg        Config
	store      *db.DB // for /readyz
	sessions   *scs.SessionManager
	fileLimits media.Limits // the composer's files
	auth       *auth
	sso        *ssoPages
	shell      *shell
	home       *home
	threads    *threads
	messages   *messages
	runs       *runs
	manage     *manage
	imports    *importPages
	workspaces *workspaces
	roles      *roles
	settings   *settings
	kbs        *kbs
	kbWeb      *kbWeb
	agent      *agentPages
	hooks      *hookPages
	media      *mediaPages
	admin      *admin
	goals      *goalPanel
	users      *adminUsers
	account    *account
	shares     *sharePages
	shareRead  *sharedPages
	models     *modelPages
	api        *apiEndpoints  // the OpenAI-compatible API (issue 19)
	tokens     *tokenPages    // API tokens on /settings (issue 19)
	rooms      *roomPages     // rooms (issue 20)
	roomLive   *roomStreams   // a room's one event stream (issue 20)
	roomRuns   *roomRuns      // Stop, approvals and questions of a room's answers
	threadLive *threadWatches // a thread page's live watch (issue 21)
}

// newEndpoints builds every handler once. The shell (the page frame) and
// the composer's agent part are built first: most pages are drawn in one,
// and the shell fills every composer with the other.
func newEndpoints(cfg Config, store *db.DB, sh sharedState, rt *chat.Runtime, kb *rag.Service, ag *agent.Agent, med *media.Service) *endpoints {
	models := rt.Models()
	tools := &agentTools{store: store, ag: ag, models: models, web: kb}
	shell := &shell{store: store, sessions: sh.sessions, models: models, agent: tools}
	home := &home{shell: shell, store: store, media: med}
	kh := &kbs{store: store, rag: kb, models: models, shell: shell, embedModel: cfg.EmbedModel, maxBytes: cfg.UserMaxBytes}
	au := &auth{store: store, sessions: sh.sessions, limit: cfg.LoginLimit, signupLimit: cfg.SignupLimit,
		hashes: sh.hashes, streams: sh.streams, seen: newSeenSessions()}
	mg := &manage{store: store, shell: shell}
	mp := &mediaPages{store: store, ms: med, blobs: med.Blobs, shell: shell}
	acc := &account{store: store, sessions: sh.sessions, hashes: sh.hashes, streams: sh.streams, limit: cfg.LoginLimit}
	tokens := &tokenPages{store: store, now: cfg.Now}
	return &endpoints{
		cfg: cfg, store: store, sessions: sh.sessions, fileLimits: med.Limits(),
		auth:       au,
		sso:        newSSOPages(cfg, store, au),
		shell:      shell,
		home:       home,
		threads:    &threads{store: store, shell: shell, home: home, rt: rt, media: med},
		messages:   &messages{store: store, rt: rt, media: med},
		runs:       &runs{store: store, models: models, rt: rt, closing: sh.closing, streams: sh.streams, sessions: sh.sessions},
		manage:     mg,
		imports:    &importPages{store: store, imports: cfg.Imports, shell: shell, manage: mg},
		workspaces: &workspaces{store: store, shell: shell, sessions: sh.sessions},
		roles:      &roles{store: store, shell: shell},
		settings:   &settings{store: store, shell: shell, account: acc, tokens: tokens},
		tokens:     tokens,
		kbs:        kh,
		kbWeb:      &kbWeb{kbs: kh, web: kb, store: store},
		agent:      &agentPages{agentTools: tools, shell: shell, rt: rt},
		hooks:      &hookPages{store: store, ag: ag, shell: shell},
		media:      mp,
		admin:      &admin{store: store, shell: shell, media: med, servers: models.Servers, mcp: cfg.MCP, web: kb},
		goals:      &goalPanel{store: store, rt: rt},
		shares:     &sharePages{store: store, shell: shell, publicURL: cfg.PublicURL, now: cfg.Now},
		shareRead:  &sharedPages{store: store, files: mp, now: cfg.Now},
		users: &adminUsers{store: store, runs: rt, blobs: med, streams: sh.streams, shell: shell,
			workspaceRoot: ag.Root, publicURL: cfg.PublicURL},
		account: acc,
		rooms:   &roomPages{store: store, shell: shell, rt: rt, tools: tools, blobs: med},
		models: &modelPages{store: store, models: models, manager: rt.Pulls(), shell: shell, streams: sh.streams,
			sessions: sh.sessions, closing: sh.closing},
		roomLive: &roomStreams{store: store, rt: rt, models: models, closing: sh.closing, streams: sh.streams,
			sessions: sh.sessions},
		roomRuns: &roomRuns{store: store, rt: rt},
		threadLive: &threadWatches{store: store, rt: rt, models: models, closing: sh.closing, streams: sh.streams,
			sessions: sh.sessions},
	}
}

// routes is the route table. The front door comes first, in order: unknown
// methods are refused before any work, then foreign Host names; only then
// logging, metrics, headers and cross-origin protection. Then the
// operations routes, the pages and actions, the larger bodies (sends,
// imports, knowledge-base uploads) and last the event streams.
func (e *endpoints) routes(m *metrics, metricsHandler http.Handler) chi.Router {
	cop := http.NewCrossOriginProtection()
	// The API takes a Bearer token and never a cookie: a cross-site request
	// carries no credential there, so there is nothing to forge.
	cop.AddInsecureBypassPattern("/v1/")
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		errorPage(w, r, http.StatusForbidden, "This request came from another site and was refused.")
	}))
	r := chi.NewRouter()
	r.Use(refuseUnknownMethods, checkHost(newHostPolicy(e.cfg.PublicURL, e.cfg.ListenAddr)), m.observe, securityHeaders, cop.Handler)
	r.NotFound(notFound)
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		errorPage(w, r, http.StatusMethodNotAllowed, "That action is not available here.")
	})

	// Operations: no session, no database work beyond a ping.
	r.Get("/healthz", healthz)
	r.Get("/readyz", readyz(e.store))
	if !e.cfg.MetricsElsewhere {
		r.Method(http.MethodGet, "/metrics", metricsHandler)
	}
	r.Get("/static/*", http.StripPrefix("/static/", staticFiles()).ServeHTTP)

	// Pages and actions: capped bodies, sessions, a signed-in user, a write
	// deadline.
	r.Group(func(r chi.Router) {
		r.Use(capBody(e.cfg.MaxBodyBytes), writeDeadline(30*time.Second), e.sessions.LoadAndSave, e.auth.withUser)
		// Single sign-on, when configured, adds its button to these pages
		// (and with WEFT_OIDC_ONLY turns the passwords off).
		r.Get("/register", e.sso.describe(e.auth.showRegister))
		r.Post("/register", e.sso.passwordsOff(true, e.sso.describe(e.auth.register)))
		r.Get("/login", e.sso.describe(e.auth.showLogin))
		r.Post("/login", e.sso.passwordsOff(false, e.sso.describe(e.auth.login)))
		r.Post("/logout", e.auth.logout)
		r.Get("/auth/oidc/login", e.sso.login)
		r.Post("/auth/oidc/login", e.sso.describe(e.sso.login)) // a refusal redraws the sign-in page
		r.Get("/auth/oidc/callback", e.sso.callback)
		// Linking to an existing account by its email needs its password,
		// also with WEFT_OIDC_ONLY (it signs in nobody but the linked account).
		r.Get("/auth/oidc/link", e.sso.showLink)
		r.Post("/auth/oidc/link", e.sso.link)
		r.Get("/invite/{token}", e.sso.describe(e.auth.showInvite))
		r.Get("/reset/{token}", e.account.showReset)
		r.Post("/reset/{token}", e.account.reset)
		r.Group(func(r chi.Router) {
			r.Use(requireUser, hideRoomThreads(e.store))
			e.conversationRoutes(r)
			e.libraryRoutes(r)
			e.roomRoutes(r)
		})
	})
	// Share links (issue 18): read by anyone with the token, so no session is
	// loaded and no user required; not indexed, not cached, no Referer. A
	// router of their own, so that a 404 or 405 under /s/ has the headers too.
	r.Route("/s", func(r chi.Router) {
		r.Use(shareHeaders, capBody(e.cfg.MaxBodyBytes), writeDeadline(2*time.Minute))
		r.Get("/{token}", e.shareRead.show)
		r.Get("/{token}/attachments/{id}", e.shareRead.attachment(false))
		r.Get("/{token}/attachments/{id}/thumb", e.shareRead.attachment(true))
		r.Get("/{token}/media/{id}", e.shareRead.media(false))
		r.Get("/{token}/media/{id}/thumb", e.shareRead.media(true))
	})
	// Sends: the composer's files make them larger than other forms.
	r.Group(func(r chi.Router) {
		withFiles := int64(e.fileLimits.MaxFiles)*e.fileLimits.MaxFileBytes + e.cfg.MaxBodyBytes + 1<<20
		r.Use(capBodyFiles(e.cfg.MaxBodyBytes, withFiles), writeDeadline(2*time.Minute),
			e.sessions.LoadAndSave, e.auth.withUser, requireUser, hideRoomThreads(e.store))
		r.Post("/t", e.threads.create)
		r.Post("/t/{id}/messages", e.threads.append)
	})
	// Imports: an export of another app may be hundreds of megabytes
	// (WEFT_IMPORT_MAX_BYTES); the job reads it after the upload.
	r.Group(func(r chi.Router) {
		r.Use(capBody(e.imports.maxBytes()+1<<20), writeDeadline(10*time.Minute), e.sessions.LoadAndSave, e.auth.withUser, requireUser)
		r.Post("/import", e.imports.upload)
	})
	// Knowledge base uploads: many files at once, each up to the file limit.
	r.Group(func(r chi.Router) {
		r.Use(capBody(e.cfg.MaxUploadBytes), writeDeadline(10*time.Minute), e.sessions.LoadAndSave, e.auth.withUser, requireUser)
		r.Post("/kb/{id}/upload", e.kbs.upload)
	})
	// The OpenAI-compatible API (issue 19): a Bearer token and nothing
	// else — no session is loaded, so the session cookie means nothing
	// here, and no other route reads a Bearer token. Capped bodies; the
	// completions have no write deadline (a stream lasts an answer).
	r.Route("/v1", func(r chi.Router) {
		r.NotFound(apiNotFoundRoute)
		r.MethodNotAllowed(apiNotFoundRoute)
		r.Use(e.api.observe, apiCapBody(e.cfg.MaxBodyBytes), e.api.bearer)
		r.With(writeDeadline(time.Minute)).Get("/models", e.api.listModels)
		r.Post("/chat/completions", e.api.chatCompletions)
		r.With(writeDeadline(5*time.Minute)).Post("/embeddings", e.api.embeddings)
	})
	// Event streams: signed in, but no write deadline (they last a run).
	r.Group(func(r chi.Router) {
		r.Use(capBody(e.cfg.MaxBodyBytes), e.sessions.LoadAndSave, e.auth.withUser, requireUser, hideRoomThreads(e.store))
		r.Get("/runs/{id}/events", e.runs.events)
		r.Get("/t/{id}/watch", e.threadLive.watch)
		r.Get("/rooms/{id}/events", e.roomLive.events)
		r.With(requireAdmin).Get("/admin/models/pulls/{id}/events", e.models.events)
	})
	return r
}

// conversationRoutes are the signed-in pages and actions on threads and
// messages, and where threads live (search, archive, workspaces).
func (e *endpoints) conversationRoutes(r chi.Router) {
	th, ms, mg, ws := e.threads, e.messages, e.manage, e.workspaces
	r.Get("/", e.home.show)

	r.Get("/t/{id}", th.show)
	r.Post("/t/{id}/rename", th.rename)
	r.Post("/t/{id}/pin", th.pin)
	r.Post("/t/{id}/archive", th.archive)
	r.Post("/t/{id}/delete", th.delete)
	r.Get("/t/{id}/title", th.title)
	r.Get("/t/{id}/history", th.history)
	r.Get("/t/{id}/context", th.context)
	r.Post("/t/{id}/settings", th.settings)
	r.Get("/t/{id}/goal", e.goals.show)
	r.Post("/t/{id}/goal", e.goals.act)
	r.Post("/m/{id}/retry", ms.retry)
	r.Post("/m/{id}/edit", ms.edit)
	r.Post("/m/{id}/continue", ms.continueAnswer)
	r.Post("/m/{id}/select", ms.selectBranch)
	r.Post("/m/{id}/fork", ms.fork)
	r.Post("/m/{id}/delete", ms.delete)
	r.Get("/m/{id}/markdown", (&messageMarkdown{store: e.store}).show)
	r.Post("/clears/{id}/undo", th.undoClear)
	r.Post("/runs/{id}/cancel", e.runs.cancel)
	e.treeRoutes(r) // labels and branch summaries

	r.Post("/t/{id}/shares", e.shares.create)
	r.Post("/shares/{id}/revoke", e.shares.revoke)
	r.Get("/shares", e.shares.list)

	r.Post("/t/{id}/move", mg.move)
	r.Get("/t/{id}/export.{format}", mg.export)
	r.Get("/search", mg.search)
	r.Get("/archived", mg.archived)
	r.Get("/import", e.imports.show)
	r.Get("/imports/{id}", e.imports.report)
	r.Get("/imports/{id}/progress", e.imports.progress)
	r.Post("/imports/{id}/stop", e.imports.stop)

	r.Get("/w/{id}/threads", e.shell.sidebarPage)
	r.Get("/workspaces", ws.list)
	r.Post("/workspaces", ws.create)
	r.Post("/workspaces/switch", ws.switchTo)
	r.Post("/workspaces/{id}/rename", ws.rename)
	r.Post("/workspaces/{id}/archive", ws.archive)
	r.Post("/workspaces/{id}/model", ws.setModel)
}

// roomRoutes are the pages and actions of rooms (issue 20). Every one reads
// the room through the user's membership first: a room that is not theirs
// is a 404. Changes are the owner's, but leaving.
func (e *endpoints) roomRoutes(r chi.Router) {
	rm := e.rooms
	r.Get("/rooms", rm.list)
	r.Post("/rooms", rm.create)
	r.Get("/rooms/{id}", rm.show)
	r.Post("/rooms/{id}/messages", rm.send)
	r.Post("/rooms/{id}/members", rm.invite)
	r.Post("/rooms/{id}/members/{user}/remove", rm.remove)
	r.Post("/rooms/{id}/leave", rm.leave)
	r.Post("/rooms/{id}/agents", rm.addAgent)
	r.Get("/rooms/{id}/agents/{agent}", rm.showAgent)
	r.Post("/rooms/{id}/agents/{agent}", rm.updateAgent)
	r.Post("/rooms/{id}/agents/{agent}/delete", rm.deleteAgent)
	r.Post("/rooms/{id}/settings", rm.saveSettings)
	r.Post("/rooms/{id}/delete", rm.delete)
	// An answer's controls: Stop by its asker or the owner, its approvals
	// and questions by its asker (rooms_runs.go).
	r.Post("/rooms/{id}/runs/{run}/stop", e.roomRuns.stop)
	r.Post("/rooms/{id}/runs/{run}/steps/{step}/decide", e.roomRuns.decide)
	r.Post("/rooms/{id}/runs/{run}/steps/{step}/answer", e.roomRuns.answer)
}

// libraryRoutes are the signed-in pages and actions around conversations:
// roles, knowledge bases, tools, settings, files and media, administration.
func (e *endpoints) libraryRoutes(r chi.Router) {
	rl, kh, ap, mp, ad := e.roles, e.kbs, e.agent, e.media, e.admin
	r.Get("/roles", rl.list)
	r.Post("/roles", rl.create)
	r.Get("/roles/{id}", rl.show)
	r.Post("/roles/{id}", rl.update)
	r.Post("/roles/{id}/delete", rl.delete)
	mem := &memoryPages{store: e.store, shell: e.shell}
	r.Get("/memory", mem.list)
	r.Post("/memory", mem.create)
	r.Post("/memory/extract", mem.setExtract)
	r.Post("/memory/{id}", mem.update)
	r.Post("/memory/{id}/delete", mem.delete)
	r.Get("/t/{id}/temporary", mem.temporary)
	r.Post("/t/{id}/temporary", mem.setTemporary)
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
	r.Post("/kb/{id}/web", e.kbWeb.on(e.kbWeb.add))
	r.Get("/kb/{id}/web", e.kbWeb.on(e.kbWeb.panel))
	r.Post("/kb/{id}/refetch", e.kbWeb.on(e.kbWeb.refetchAll))
	r.Post("/kb/{id}/documents/{doc}/refetch", e.kbWeb.on(e.kbWeb.refetch))
	r.Get("/m/{id}/sources/{n}", kh.source)
	r.Post("/t/{id}/kbs", e.threads.setKBs)
	r.Get("/tools", ap.settings)
	r.Post("/tools", ap.saveSettings)
	r.Post("/steps/{id}/decide", ap.decide)
	r.Post("/steps/{id}/answer", ap.answer)
	r.Post("/runs/{id}/resume", ap.resume)
	r.Get("/t/{id}/debug", ap.debug)
	r.Get("/tools/hooks", e.hooks.list)
	r.Post("/tools/hooks", e.hooks.create)
	r.Post("/tools/hooks/{id}/delete", e.hooks.delete)
	r.Get("/settings", e.settings.show)
	r.Post("/settings/instructions", e.settings.setInstructions)
	r.Post("/settings/password", e.settings.changePassword)
	r.Post("/settings/sessions/others", e.account.signOutOthers)
	r.Post("/settings/sessions/{id}/delete", e.account.signOutOne)
	r.Post("/settings/tokens", e.tokens.create(e.settings))
	r.Post("/settings/tokens/{id}/revoke", e.tokens.revoke)

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
	r.With(requireAdmin).Post("/admin/web-search", ad.setWebSearch)
	r.With(requireAdmin).Post("/reload-mcp", ad.reloadMCP)
	e.userAdminRoutes(r)

	// Models (issue 18): everyone sees the list; administrators manage.
	md := e.models
	r.Get("/models", md.list)
	r.With(requireAdmin).Get("/admin/models", md.admin)
	r.With(requireAdmin).Post("/admin/models/pull", md.pull)
	r.With(requireAdmin).Post("/admin/models/pulls/{id}/cancel", md.cancel)
	r.With(requireAdmin).Get("/admin/models/delete", md.confirmDelete)
	r.With(requireAdmin).Post("/admin/models/delete", md.delete)
	r.With(requireAdmin).Post("/admin/models/unload", md.unload)
}

// userAdminRoutes are the administrator's pages and actions on accounts
// and invites (issue 18).
func (e *endpoints) userAdminRoutes(r chi.Router) {
	us := e.users
	r.Group(func(r chi.Router) {
		r.Use(requireAdmin)
		r.Get("/admin/users", us.list)
		r.Get("/admin/users/{id}", us.show)
		r.Post("/admin/users/{id}/disable", us.setDisabled(true))
		r.Post("/admin/users/{id}/enable", us.setDisabled(false))
		r.Post("/admin/users/{id}/role", us.setRole)
		r.Post("/admin/users/{id}/reset-link", us.resetLink)
		r.Post("/admin/users/{id}/delete", us.delete)
		r.Post("/admin/invites", us.createInvite)
		r.Post("/admin/invites/{id}/revoke", us.revokeInvite)
	})
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
