// POST through the same address policy: the lifecycle hooks a workspace's
// owner adds (they name the URL, so it must not reach the machine's own
// network either).

package webfetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
)

// AllowPrefixes returns a copy of c that may also dial the addresses in
// prefixes: the administrator's exceptions (WEFT_HOOKS_ALLOW), never a
// user's. Every other address still meets the public-internet policy.
func (c Client) AllowPrefixes(prefixes ...netip.Prefix) Client {
	if len(prefixes) == 0 {
		return c
	}
	next := c.allow
	if next == nil {
		next = checkAddr
	}
	c.allow = func(ap netip.AddrPort) error {
		a := ap.Addr().Unmap().WithZone("")
		if slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(a) }) {
			return nil
		}
		return next(ap)
	}
	return c
}

// Post sends body to rawURL in one POST with header, following no
// redirect, and returns the answer's body (up to MaxBytes) when its status
// is 2xx. Every failure the caller can show is an *Error; a cancelled ctx
// is returned as is (wrapped).
func (c Client) Post(ctx context.Context, rawURL string, header http.Header, body []byte) ([]byte, error) {
	cfg := c.withDefaults()
	u, err := CheckURL(rawURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.Timeout, errTimeout)
	defer cancel()
	tr := cfg.transport()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, errorf("this URL cannot be used")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, cfg.postFailure(ctx, u.Hostname(), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, cfg.MaxBytes))
	if err != nil {
		return nil, cfg.postFailure(ctx, u.Hostname(), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		status := fmt.Sprint(resp.StatusCode)
		if text := http.StatusText(resp.StatusCode); text != "" {
			status += " " + text
		}
		return nil, &Error{Msg: "the server answered " + status, Status: resp.StatusCode}
	}
	return data, nil
}

func (c Client) postFailure(ctx context.Context, host string, err error) error {
	var be *blockedError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &be):
		return errorf("blocked: %s resolves to a private or local address", host)
	case errors.Is(context.Cause(ctx), errTimeout):
		return errorf("no answer within %s", c.Timeout)
	case ctx.Err() != nil:
		return fmt.Errorf("post: %w", context.Cause(ctx))
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return errorf("%s was not found", host)
	}
	return errorf("%s could not be reached", host)
}

// Refuses reports why c would not dial addr ("" when it would): a check
// of a literal address named in a URL, before any request.
func (c Client) Refuses(addr netip.Addr) string {
	allow := c.withDefaults().allow
	if err := allow(netip.AddrPortFrom(addr, 443)); err != nil {
		return err.Error()
	}
	return ""
}
