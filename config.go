package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ollama/ollama/envconfig"

	"weft/agent"
	"weft/chat"
	"weft/extract"
	"weft/handlers"
	"weft/importer"
	"weft/internal/app"
	"weft/mcp"
	"weft/media"
	"weft/rag"
	"weft/sandbox"
)

type config struct {
	addr         string
	databaseURL  string
	dataDir      string
	ollamaHosts  []*url.URL
	defaultModel string
	instance     string
	maxCtx       int
	userRuns     int
	grace        time.Duration
	tlsCert      string
	tlsKey       string
	logFormat    string
	maxBody      int64
	compactAt    float64
	embedModel   string
	kbFileBytes  int64
	uploadBytes  int64
	importBytes  int64 // WEFT_IMPORT_MAX_BYTES: one export to import
	attachBytes  int64
	attachFiles  int
	extractors   int
	publicURL    *url.URL
	metricsAddr  string
	metricsToken string
	maxStreams   int
	signupLimit  int
	apiRate      int // WEFT_API_RATE: requests per minute per API token, 0 = no limit
	mediaWorkers int
	mediaPending int
	// Sub-agents: rounds, seconds of work and concurrency of each.
	subRounds, subSeconds, subConcurrency int
	userBytes                             int64
	kbWebOff                              bool
	search                                rag.WebSearchSettings // WEFT_SEARCH_URL, WEFT_SEARCH_KIND
	shell                                 sandbox.Config
	s3                                    *media.S3Config // nil: blobs under WEFT_DATA_DIR/blobs
	mcp                                   mcp.Config      // WEFT_MCP_CONFIG
	hooks                                 agent.HooksConfig
	oidc                                  *handlers.OIDCConfig // WEFT_OIDC_*: nil without single sign-on
}

func loadConfig() (config, error) {
	c := config{
		addr:         env("WEFT_ADDR", "127.0.0.1:8080"),
		databaseURL:  os.Getenv("DATABASE_URL"),
		dataDir:      env("WEFT_DATA_DIR", "./data"),
		defaultModel: os.Getenv("WEFT_DEFAULT_MODEL"),
		instance:     os.Getenv("WEFT_INSTANCE_ID"),
		tlsCert:      os.Getenv("WEFT_TLS_CERT"),
		tlsKey:       os.Getenv("WEFT_TLS_KEY"),
		logFormat:    env("WEFT_LOG_FORMAT", "text"),
		embedModel:   env("WEFT_EMBED_MODEL", "nomic-embed-text"),
		metricsAddr:  os.Getenv("WEFT_METRICS_ADDR"),
		metricsToken: os.Getenv("WEFT_METRICS_TOKEN"),
	}
	var err error
	// OLLAMA_HOST: one server read the way Ollama reads it, or several
	// separated by commas, each read that way.
	if v := os.Getenv("OLLAMA_HOST"); strings.Contains(v, ",") {
		if c.ollamaHosts, err = chat.ParseOllamaHosts(v); err != nil {
			return c, err
		}
	} else {
		c.ollamaHosts = []*url.URL{envconfig.Host()}
	}
	if v := os.Getenv("WEFT_PUBLIC_URL"); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return c, fmt.Errorf("WEFT_PUBLIC_URL must be an http:// or https:// URL with a host name, got %q", v)
		}
		c.publicURL = u
	}
	if c.oidc, err = oidcConfig(c.publicURL); err != nil {
		return c, err
	}
	if c.maxStreams, err = envInt("WEFT_MAX_STREAMS_PER_USER", 20, 1); err != nil {
		return c, err
	}
	if c.signupLimit, err = envInt("WEFT_SIGNUP_LIMIT", 10, 0); err != nil {
		return c, err
	}
	if c.apiRate, err = envInt("WEFT_API_RATE", 60, 0); err != nil {
		return c, err
	}
	if c.maxBody, err = envInt[int64]("WEFT_MAX_BODY_BYTES", 1<<20, 1024); err != nil {
		return c, err
	}
	if c.kbFileBytes, err = envInt[int64]("WEFT_KB_MAX_FILE_BYTES", 50<<20, 1024); err != nil {
		return c, err
	}
	if c.uploadBytes, err = envInt[int64]("WEFT_KB_MAX_UPLOAD_BYTES", 512<<20, 1024); err != nil {
		return c, err
	}
	if c.importBytes, err = envInt[int64]("WEFT_IMPORT_MAX_BYTES", importer.DefaultMaxBytes, 1024); err != nil {
		return c, err
	}
	if c.attachBytes, err = envInt[int64]("WEFT_ATTACH_MAX_BYTES", 8<<20, 1024); err != nil {
		return c, err
	}
	if c.attachFiles, err = envInt("WEFT_ATTACH_MAX_FILES", 10, 1); err != nil {
		return c, err
	}
	if c.userBytes, err = envInt[int64]("WEFT_USER_MAX_BYTES", 1<<30, 1024); err != nil {
		return c, err
	}
	if c.mediaWorkers, err = envInt("WEFT_MEDIA_WORKERS", 2, 1); err != nil {
		return c, err
	}
	if c.mediaPending, err = envInt("WEFT_MAX_MEDIA_JOBS_PER_USER", 5, 1); err != nil {
		return c, err
	}
	if c.subRounds, err = envInt("WEFT_SUBAGENT_ROUNDS", 10, 1); err != nil {
		return c, err
	}
	if c.subSeconds, err = envInt("WEFT_SUBAGENT_SECONDS", 300, 1); err != nil {
		return c, err
	}
	if c.subConcurrency, err = envInt("WEFT_SUBAGENT_CONCURRENCY", 2, 1); err != nil {
		return c, err
	}
	if c.extractors, err = envInt("WEFT_EXTRACT_WORKERS", extract.DefaultWorkers, 1); err != nil {
		return c, err
	}
	if c.maxCtx, err = envInt("WEFT_MAX_NUM_CTX", 8192, 256); err != nil {
		return c, err
	}
	if c.userRuns, err = envInt("WEFT_MAX_RUNS_PER_USER", 3, 1); err != nil {
		return c, err
	}
	c.compactAt = 0.85
	if v := os.Getenv("WEFT_COMPACT_AT"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			return c, fmt.Errorf("WEFT_COMPACT_AT must be a number above 0 and at most 1 (the context fill that triggers a summary), got %q", v)
		}
		c.compactAt = f
	}
	switch v := os.Getenv("WEFT_KB_WEB"); v {
	case "", "on":
	case "off":
		c.kbWebOff = true
	default:
		return c, fmt.Errorf("WEFT_KB_WEB must be on or off (knowledge bases may add pages from the web), got %q", v)
	}
	if c.search, err = searchConfig(); err != nil {
		return c, err
	}
	if c.shell, err = shellConfig(); err != nil {
		return c, err
	}
	if c.s3, err = s3Config(); err != nil {
		return c, err
	}
	// An MCP configuration that does not parse stops start-up here, with
	// the server and field at fault; /reload-mcp re-reads it later.
	if path := os.Getenv("WEFT_MCP_CONFIG"); path != "" {
		servers, err := mcp.LoadFile(path)
		if err != nil {
			return c, err
		}
		c.mcp = mcp.Config{File: path, Servers: servers}
	}
	if c.hooks, err = hooksConfig(); err != nil {
		return c, err
	}
	grace, err := envInt("WEFT_SHUTDOWN_GRACE_SECONDS", 10, 0)
	if err != nil {
		return c, err
	}
	c.grace = time.Duration(grace) * time.Second
	if c.instance == "" {
		// Stable across restarts of this process on this host and address, so
		// that a restart recognises (and interrupts) the runs of its old life.
		host, _ := os.Hostname()
		c.instance = host + "/" + c.addr
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return c, errors.New("set both WEFT_TLS_CERT and WEFT_TLS_KEY, or neither")
	}
	return c, nil
}

func envInt[T int | int64](key string, def, min T) (T, error) {
	v := os.Getenv(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || T(n) < min {
		return def, fmt.Errorf("%s must be a whole number ≥ %d, got %q", key, min, v)
	}
	return T(n), nil
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// listensOnLoopback reports whether addr (WEFT_ADDR) is reachable only from
// this machine: a loopback IP or "localhost". An empty host or a wildcard
// listens on every interface.
// needsSetupToken tells whether the first account must prove it read the
// log: when Weft listens beyond loopback, or is published under a public
// name (a proxy in front of a loopback listener), whoever reaches it first
// must not become the administrator.
func needsSetupToken(addr string, public *url.URL) bool {
	return !listensOnLoopback(addr) || (public != nil && !listensOnLoopback(public.Hostname()))
}

func listensOnLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// s3Config reads the S3-compatible bucket blobs are kept in, when
// WEFT_S3_BUCKET is set: WEFT_S3_ENDPOINT (required), WEFT_S3_PREFIX,
// WEFT_S3_REGION and the keys WEFT_S3_ACCESS_KEY / WEFT_S3_SECRET_KEY, or
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY as the AWS tools read them.
func s3Config() (*media.S3Config, error) {
	bucket := os.Getenv("WEFT_S3_BUCKET")
	if bucket == "" {
		for _, k := range []string{"WEFT_S3_ENDPOINT", "WEFT_S3_PREFIX", "WEFT_S3_REGION", "WEFT_S3_ACCESS_KEY", "WEFT_S3_SECRET_KEY"} {
			if os.Getenv(k) != "" {
				return nil, fmt.Errorf("%s is set but WEFT_S3_BUCKET is not: set the bucket to keep files in S3, or unset %s", k, k)
			}
		}
		return nil, nil
	}
	c := &media.S3Config{Bucket: bucket, Endpoint: os.Getenv("WEFT_S3_ENDPOINT"), Prefix: os.Getenv("WEFT_S3_PREFIX"),
		Region: os.Getenv("WEFT_S3_REGION"), AccessKey: env("WEFT_S3_ACCESS_KEY", os.Getenv("AWS_ACCESS_KEY_ID")),
		SecretKey: env("WEFT_S3_SECRET_KEY", os.Getenv("AWS_SECRET_ACCESS_KEY"))}
	if c.Endpoint == "" {
		return nil, errors.New("WEFT_S3_BUCKET is set but WEFT_S3_ENDPOINT is not: set the S3 server, e.g. https://s3.eu-west-1.amazonaws.com or http://minio:9000")
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return nil, errors.New("set both WEFT_S3_ACCESS_KEY and WEFT_S3_SECRET_KEY (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or neither")
	}
	return c, nil
}

// hooksConfig reads the lifecycle hooks: the administrator's hooks file
// (WEFT_HOOKS_CONFIG), and WEFT_HOOKS_ALLOW, the addresses, CIDR ranges or
// host names that workspaces' hooks may reach although they are not the
// public internet (comma-separated).
func hooksConfig() (agent.HooksConfig, error) {
	var c agent.HooksConfig
	if path := os.Getenv("WEFT_HOOKS_CONFIG"); path != "" {
		hooks, err := agent.ParseHooksFile(path)
		if err != nil {
			return c, fmt.Errorf("WEFT_HOOKS_CONFIG: %w", err)
		}
		c.Hooks = hooks
	}
	for _, a := range strings.Split(os.Getenv("WEFT_HOOKS_ALLOW"), ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if strings.ContainsAny(a, "/:") && !strings.Contains(a, "/") && net.ParseIP(a) == nil {
			return c, fmt.Errorf("WEFT_HOOKS_ALLOW lists addresses, CIDR ranges or host names (no ports or URLs), got %q", a)
		}
		if strings.Contains(a, "/") {
			if _, _, err := net.ParseCIDR(a); err != nil {
				return c, fmt.Errorf("WEFT_HOOKS_ALLOW: %q is not a CIDR range such as 10.0.0.0/8", a)
			}
		}
		c.Allow = append(c.Allow, a)
	}
	return c, nil
}

// appConfig maps the environment's settings onto the application's.
func appConfig(cfg config) app.Config {
	return app.Config{
		Ollama:       cfg.ollamaHosts,
		DefaultModel: cfg.defaultModel,
		MaxCtx:       cfg.maxCtx,
		DataDir:      cfg.dataDir,
		Chat:         chat.Config{Instance: cfg.instance, PerUserRuns: cfg.userRuns, CompactAt: cfg.compactAt},
		MCP:          cfg.mcp,
		RAG:          rag.Config{MaxFileBytes: cfg.kbFileBytes, WebOff: cfg.kbWebOff, Search: cfg.search},
		Import:       importer.Limits{MaxBytes: cfg.importBytes},
		Shell:        &cfg.shell,
		Agent: agent.Config{Hooks: cfg.hooks, SubagentRounds: cfg.subRounds, SubagentTime: time.Duration(cfg.subSeconds) * time.Second,
			SubagentConcurrency: cfg.subConcurrency},
		Media: media.Config{Limits: media.Limits{MaxFileBytes: cfg.attachBytes, MaxFiles: cfg.attachFiles},
			Workers: cfg.mediaWorkers, MaxPendingPerUser: cfg.mediaPending},
		HTTP: handlers.Config{
			SecureCookies:     cfg.tlsCert != "",
			MaxBodyBytes:      cfg.maxBody,
			MaxUploadBytes:    cfg.uploadBytes,
			EmbedModel:        cfg.embedModel,
			PublicURL:         cfg.publicURL,
			ListenAddr:        cfg.addr,
			MetricsElsewhere:  cfg.metricsAddr != "",
			MetricsToken:      cfg.metricsToken,
			MaxStreamsPerUser: cfg.maxStreams,
			SignupLimit:       cfg.signupLimit,
			APIRate:           apiRate(cfg.apiRate),
			UserMaxBytes:      cfg.userBytes,
			OIDC:              cfg.oidc,
		},
	}
}

// apiRate is WEFT_API_RATE for handlers.Config: there 0 is the default
// and a negative number no limit.
func apiRate(perMinute int) int {
	if perMinute == 0 {
		return -1
	}
	return perMinute
}

// searchConfig reads the search service used until an administrator saves
// one on /admin: WEFT_SEARCH_URL (a SearXNG instance's base URL) and
// WEFT_SEARCH_KIND (searxng, the default).
func searchConfig() (rag.WebSearchSettings, error) {
	w := rag.WebSearchSettings{Kind: os.Getenv("WEFT_SEARCH_KIND"), URL: strings.TrimRight(strings.TrimSpace(os.Getenv("WEFT_SEARCH_URL")), "/")}
	if w.Kind == "" {
		w.Kind = rag.SearchSearXNG
	}
	if w.Kind != rag.SearchSearXNG {
		return w, fmt.Errorf("WEFT_SEARCH_KIND must be searxng, got %q", w.Kind)
	}
	if w.URL != "" {
		u, err := url.Parse(w.URL)
		switch {
		case err != nil:
			return w, fmt.Errorf("WEFT_SEARCH_URL must be an http or https URL (a SearXNG instance)")
		case u.User != nil:
			// As /admin's form: a password in the URL would be shown back
			// on /admin and in this error; a key goes in the form's field.
			return w, fmt.Errorf("WEFT_SEARCH_URL must not contain a user name or password (set an API key on /admin instead), got %q", u.Redacted())
		case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
			return w, fmt.Errorf("WEFT_SEARCH_URL must be an http or https URL (a SearXNG instance's base address, without ?… or #…), got %q", w.URL)
		}
	}
	return w, nil
}
