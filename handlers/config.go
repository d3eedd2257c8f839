package handlers

import (
	"net/url"
	"time"
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
	// MCP is the MCP servers /admin shows and /reload-mcp reloads (nil:
	// none configured).
	MCP MCPServers
	// OIDC is single sign-on (WEFT_OIDC_*; nil: none).
	OIDC *OIDCConfig
	// APIRate is WEFT_API_RATE: requests per minute one API token may make,
	// counted in Postgres (default 60; negative: no limit).
	APIRate int
	// APIWriteTimeout bounds each write of an API answer: a caller that
	// stops reading for that long is gone, and its model request is
	// cancelled (default 30 s).
	APIWriteTimeout time.Duration
	// Imports imports other apps' exports in the background
	// (importer.Service; nil: /import takes Weft's own exports only).
	Imports Importer
	// Now is the clock share links expire by (nil: time.Now); tests move it.
	Now func() time.Time
}

// withDefaults fills what the deployment left unset.
func (cfg Config) withDefaults() Config {
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
	if cfg.MaxStreamsPerUser <= 0 {
		cfg.MaxStreamsPerUser = 20
	}
	if cfg.APIRate == 0 {
		cfg.APIRate = 60
	}
	if cfg.APIWriteTimeout == 0 {
		cfg.APIWriteTimeout = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.StreamSweep == 0 {
		cfg.StreamSweep = 10 * time.Second
	}
	cfg.OIDC = cfg.OIDC.withDefaults(cfg.PublicURL)
	return cfg
}
