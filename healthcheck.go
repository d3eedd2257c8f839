package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// healthcheck is `weft healthcheck`: the container's HEALTHCHECK. Images
// without curl or a shell can still ask the server they run whether it is
// ready. It reads the same environment as the server (WEFT_ADDR,
// WEFT_TLS_CERT), asks GET /readyz on the listen address (an unspecified
// address is asked on loopback; the health routes answer any Host name),
// and exits 0 when it answers 200, 1 otherwise.
func healthcheck(stderr io.Writer) int {
	target, err := healthTarget(env("WEFT_ADDR", "127.0.0.1:8080"), os.Getenv("WEFT_TLS_CERT") != "")
	if err != nil {
		fmt.Fprintln(stderr, "weft healthcheck:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		fmt.Fprintln(stderr, "weft healthcheck:", err)
		return 1
	}
	client := &http.Client{
		Transport: &http.Transport{
			// The server is this container's own process on loopback: its
			// certificate names the public host, not 127.0.0.1, and there
			// is no one in between to verify it against.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
			// No proxy from the environment: the server is on loopback.
			Proxy: nil,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "weft healthcheck: not reachable:", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		fmt.Fprintf(stderr, "weft healthcheck: /readyz answered %d: %s\n", resp.StatusCode, strings.TrimSpace(string(body)))
		return 1
	}
	return 0
}

// healthTarget is the URL to ask: /readyz on the listen address, on
// loopback when the server listens on every address.
func healthTarget(addr string, tlsOn bool) (string, error) {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("WEFT_ADDR %q: %w", addr, err)
	}
	if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
		h = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			h = "::1"
		}
	}
	scheme := "http"
	if tlsOn {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(h, port) + "/readyz", nil
}
