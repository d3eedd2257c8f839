package webfetch

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

func TestCheckAddrBlocksEveryPrivateAndLocalForm(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr    string
		blocked bool
	}{
		// IPv4
		{"8.8.8.8", false},
		{"1.1.1.1", false},
		{"93.184.215.14", false},
		{"100.63.255.255", false},
		{"100.128.0.0", false},
		{"172.32.0.1", false},
		{"198.20.0.1", false},
		{"223.255.255.255", false},
		{"127.0.0.1", true},
		{"127.255.255.254", true},
		{"10.0.0.1", true},
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"192.168.1.1", true},
		{"169.254.0.1", true},
		{"169.254.169.254", true}, // cloud metadata
		{"100.64.0.1", true},      // CGNAT
		{"100.100.100.200", true}, // Alibaba metadata, in CGNAT
		{"0.0.0.0", true},
		{"0.1.2.3", true},
		{"192.0.0.1", true},
		{"192.0.0.192", true}, // Oracle metadata
		{"198.18.0.1", true},
		{"198.19.255.255", true},
		{"224.0.0.1", true},
		{"239.255.255.250", true},
		{"240.0.0.1", true},
		{"255.255.255.255", true},
		// IPv6
		{"2606:4700:4700::1111", false},
		{"2001:4860:4860::8888", false},
		{"::1", true},
		{"::", true},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"fc00::1", true},
		{"fd12:3456::1", true},
		{"fd00:ec2::254", true}, // AWS metadata over IPv6
		{"ff02::1", true},
		{"ff05::2", true},
		{"fec0::1", true},
		{"2001:db8::1", true},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", true}, // Teredo
		// IPv4-mapped and IPv4-compatible IPv6
		{"::ffff:8.8.8.8", false},
		{"::ffff:127.0.0.1", true},
		{"::ffff:10.1.2.3", true},
		{"::ffff:169.254.169.254", true},
		{"::ffff:100.64.0.1", true},
		{"::127.0.0.1", true},
		{"::169.254.169.254", true},
		// NAT64
		{"64:ff9b::808:808", false}, // 8.8.8.8
		{"64:ff9b::7f00:1", true},   // 127.0.0.1
		{"64:ff9b::a9fe:a9fe", true},
		{"64:ff9b::c0a8:101", true},
		{"64:ff9b:1::808:808", true}, // local-use NAT64
		// 6to4
		{"2002:808:808::1", false},
		{"2002:7f00:1::1", true},
		{"2002:a9fe:a9fe::1", true},
		{"2002:a00:1::", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()
			ap := netip.AddrPortFrom(netip.MustParseAddr(tt.addr), 443)
			err := checkAddr(ap)
			if got := err != nil; got != tt.blocked {
				t.Errorf("checkAddr(%s) = %v, want blocked %v", ap, err, tt.blocked)
			}
		})
	}
	if err := checkAddr(netip.AddrPort{}); err == nil {
		t.Error("the zero AddrPort is allowed")
	}
}

// server is an httptest server on 127.0.0.1 that counts its requests.
type server struct {
	*httptest.Server
	hits atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) addr() netip.AddrPort { return netip.MustParseAddrPort(s.Listener.Addr().String()) }

// fetchError asserts that err is an *Error whose text contains want.
func fetchError(t *testing.T, err error, want string) *Error {
	t.Helper()
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v (%T), want an *Error", err, err)
	}
	if !strings.Contains(fe.Msg, want) {
		t.Errorf("message %q does not say %q", fe.Msg, want)
	}
	for _, internal := range []string{"dial", "tcp", "context", ".go", "%!"} {
		if strings.Contains(fe.Msg, internal) {
			t.Errorf("message %q shows an internal (%q)", fe.Msg, internal)
		}
	}
	return fe
}

func TestTheDefaultClientRefusesALoopbackServerBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "secret") })
	_, err := Client{}.Get(t.Context(), Request{URL: s.URL})
	fetchError(t, err, "web fetch blocked: 127.0.0.1 resolves to a private or local address")
	if n := s.hits.Load(); n != 0 {
		t.Errorf("the server got %d requests, want 0", n)
	}
}

func TestAHostNameResolvingToLoopbackIsBlockedAtConnectTime(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "secret") })
	u := strings.Replace(s.URL, "127.0.0.1", "localhost", 1)
	var dialled atomic.Int64 // the dialer may try ::1 and 127.0.0.1 at once
	c := Client{allow: func(ap netip.AddrPort) error {
		dialled.Add(1)
		return checkAddr(ap)
	}}
	_, err := c.Get(t.Context(), Request{URL: u})
	fetchError(t, err, "web fetch blocked: localhost resolves to a private or local address")
	if dialled.Load() == 0 {
		t.Error("the check never saw the dialled address")
	}
	if n := s.hits.Load(); n != 0 {
		t.Errorf("the server got %d requests, want 0", n)
	}
}

func TestAllowForTestLetsThroughOnlyTheAddressesItNames(t *testing.T) {
	t.Parallel()
	ok := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	other := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "secret") })
	c := Client{}.AllowForTest(ok.addr())
	resp, err := c.Get(t.Context(), Request{URL: ok.URL})
	if err != nil || string(resp.Body) != "hello" {
		t.Fatalf("the allowed server: %v, %+v", err, resp)
	}
	_, err = c.Get(t.Context(), Request{URL: other.URL})
	fetchError(t, err, "blocked")
	if other.hits.Load() != 0 {
		t.Error("a server the test did not name was reached")
	}
}

func TestTheTransportNeverUsesAProxyFromTheEnvironment(t *testing.T) {
	t.Parallel()
	if tr := (Client{}).withDefaults().transport(); tr.Proxy != nil {
		t.Error("the transport has a proxy: the address check would see the proxy, not the page")
	}
}

func TestAConditionalRequestSendsTheValidatorsAndReportsNotModified(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == `"v1"` && r.Header.Get("If-Modified-Since") == "Mon, 02 Jan 2006 15:04:05 GMT" {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
		w.Header().Set("Content-Type", "text/HTML; charset=utf-8")
		fmt.Fprint(w, "<p>page</p>")
	})
	c := Client{}.AllowForTest(s.addr())
	first, err := c.Get(t.Context(), Request{URL: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	if first.NotModified || first.ETag != `"v1"` || first.LastModified == "" || first.MediaType != "text/html" || string(first.Body) != "<p>page</p>" {
		t.Fatalf("first fetch = %+v", first)
	}
	again, err := c.Get(t.Context(), Request{URL: s.URL, IfNoneMatch: first.ETag, IfModifiedSince: first.LastModified})
	if err != nil {
		t.Fatal(err)
	}
	if !again.NotModified || len(again.Body) != 0 {
		t.Errorf("the conditional fetch = %+v, want not modified", again)
	}
}

func TestAnUnaskedNotModifiedIsAnError(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotModified) })
	_, err := Client{}.AllowForTest(s.addr()).Get(t.Context(), Request{URL: s.URL})
	if fe := fetchError(t, err, "the server answered 304 Not Modified"); fe.Status != 304 {
		t.Errorf("status = %d", fe.Status)
	}
}

func TestWholeRefusesABodyOverTheLimitWhetherOrNotItsLengthIsSent(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/streamed" {
			w.(http.Flusher).Flush() // no Content-Length: chunked
		}
		fmt.Fprint(w, strings.Repeat("x", 5000))
	})
	c := Client{MaxBytes: 1000}.AllowForTest(s.addr())
	for _, path := range []string{"/sized", "/streamed"} {
		_, err := c.Get(t.Context(), Request{URL: s.URL + path, Whole: true})
		fetchError(t, err, "the page is larger than the limit of 1000 bytes")
	}
	cut, err := c.Get(t.Context(), Request{URL: s.URL + "/streamed"})
	if err != nil || !cut.Truncated || len(cut.Body) != 1000 {
		t.Errorf("without Whole: %v, truncated %v, %d bytes", err, cut.Truncated, len(cut.Body))
	}
}

func TestCheckURLRefusesWhatMustNotBeFetched(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ url, want string }{
		{"http://user:pass@example.com/", "user name or password"},
		{"ftp://example.com/file", "only http and https pages can be fetched, not ftp"},
		{"example.com/page", "needs a full URL"},
		{"http:///path", "no host name"},
	} {
		_, err := CheckURL(tt.url)
		fetchError(t, err, tt.want)
	}
	if u, err := CheckURL("  https://example.com:8443/a?b#c "); err != nil || u.Host != "example.com:8443" {
		t.Errorf("a good URL: %v, %v", u, err)
	}
}
