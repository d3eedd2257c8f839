package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// knownMethods are the only methods Weft answers. Anything else is refused
// before any other work, so that an attacker-chosen method never reaches a
// log line, a metric label, the session store or the database.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// refuseUnknownMethods is the first middleware. A plain-text 501 (RFC 9110
// §15.6.2: a method the server does not recognise) costs no template and no
// allocation that grows with the method.
func refuseUnknownMethods(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !knownMethods[r.Method] {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusNotImplemented)
			_, _ = w.Write([]byte("Unknown request method.\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// metricMethod maps a method to a fixed label set (the middleware above
// already refused the rest; this keeps the label bounded on its own).
func metricMethod(m string) string {
	if knownMethods[m] {
		return m
	}
	return "other"
}

// hostPolicy decides which Host headers are Weft's. A DNS-rebinding page
// reaches a loopback server under its own name (evil.example resolving to
// 127.0.0.1); refusing foreign names stops it before sessions or sign-up.
type hostPolicy struct {
	names map[string]bool // lower-case host names without port
	// anyIP accepts IP-literal hosts: set when Weft listens on every
	// interface without a public URL. A rebinding attack always carries a
	// DNS name, never an IP literal, so this keeps LAN access by address.
	anyIP bool
}

// newHostPolicy builds the policy: the public URL's host alone when one is
// set; otherwise the listen address and the loopback forms.
func newHostPolicy(public *url.URL, listen string) hostPolicy {
	p := hostPolicy{names: map[string]bool{}}
	if public != nil && public.Host != "" {
		p.names[strings.ToLower(public.Hostname())] = true
		return p
	}
	for _, n := range []string{"localhost", "127.0.0.1", "::1"} {
		p.names[n] = true
	}
	host := listen
	if h, _, err := net.SplitHostPort(listen); err == nil {
		host = h
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	switch ip := net.ParseIP(host); {
	case host == "", ip != nil && ip.IsUnspecified():
		p.anyIP = true
	default:
		p.names[host] = true
	}
	return p
}

func (p hostPolicy) allows(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if p.names[host] {
		return true
	}
	if p.anyIP && net.ParseIP(host) != nil {
		return true
	}
	// 127.0.0.0/8 is loopback too (httptest and some setups use 127.x.y.z).
	if p.names["127.0.0.1"] {
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			return true
		}
	}
	return false
}

// checkHost refuses requests for a Host that is not Weft's with a 421
// (RFC 9110 §15.5.20: the request was sent to a server that will not answer
// for that name). The health probes are exempt: load balancers call them by
// address, and they reveal and change nothing.
func checkHost(p hostPolicy) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !p.allows(r.Host) && r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.WriteHeader(http.StatusMisdirectedRequest)
				_, _ = w.Write([]byte("This server does not answer for that host name.\n"))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// requireBearer guards /metrics with a token when one is configured. The
// comparison is of hashes, in constant time.
func requireBearer(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="weft-metrics"`)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte("A metrics token is required.\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
