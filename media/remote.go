package media

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"weft/internal/usererr"
)

// remote is one call to a media server with an OpenAI-style API.
type remote struct {
	what   string // "speech server", for messages
	base   string
	apiKey string
	client *http.Client
}

// endpoint joins the base URL and an API path ("/v1/…"); a base already
// ending in /v1 (as OpenAI's is often written) is taken as meaning the same.
func (r remote) endpoint(apiPath string) (string, error) {
	base := strings.TrimRight(strings.TrimSpace(r.base), "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("media: the %s URL must be an http(s) address, e.g. http://localhost:8000", r.what)
	}
	if strings.HasSuffix(base, "/v1") && strings.HasPrefix(apiPath, "/v1/") {
		base = strings.TrimSuffix(base, "/v1")
	}
	return base + apiPath, nil
}

func (r remote) httpClient() *http.Client {
	if r.client != nil {
		return r.client
	}
	return http.DefaultClient // no timeout of its own: ctx bounds every call
}

// post sends a JSON body and returns the reply's body, at most max bytes.
func (r remote) post(ctx context.Context, apiPath string, body []byte, max int64) ([]byte, error) {
	u, err := r.endpoint(apiPath)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("media: %s request: %w", r.what, err)
	}
	req.Header.Set("Content-Type", "application/json")
	return r.do(req, true, max)
}

// get fetches a URL the server pointed to; the API key goes only to the
// server's own origin.
func (r remote) get(ctx context.Context, rawURL string, max int64) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("media: the %s gave a URL that is not http(s)", r.what)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("media: %s request: %w", r.what, err)
	}
	base, _ := url.Parse(strings.TrimSpace(r.base))
	sameOrigin := base != nil && strings.EqualFold(base.Scheme, u.Scheme) && strings.EqualFold(base.Host, u.Host)
	return r.do(req, sameOrigin, max)
}

func (r remote) do(req *http.Request, withKey bool, max int64) ([]byte, error) {
	if withKey && r.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.apiKey)
	}
	resp, err := r.httpClient().Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, fmt.Errorf("media: %s: %w", r.what, ctxErr)
		}
		return nil, &remoteError{what: r.what, cause: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
		return nil, &remoteError{what: r.what, status: resp.Status, text: r.errorText(snippet)}
	}
	if resp.ContentLength > max {
		return nil, fmt.Errorf("media: the %s's reply is %s, over the limit of %s", r.what, readableSize(resp.ContentLength), readableSize(max))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("media: reading the %s's reply: %w", r.what, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("media: the %s's reply is over the limit of %s", r.what, readableSize(max))
	}
	return data, nil
}

// remoteError is a media server that could not be reached (cause set) or
// answered with an error status (status and its cleaned text). Its user
// message names the server by role only; the log also gets the transport
// error, which holds the URL.
type remoteError struct {
	what   string // "speech server"
	cause  error
	status string // "503 Service Unavailable"
	text   string // the server's message, from errorText
}

func (e *remoteError) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("media: %s unreachable: %v", e.what, e.cause)
	}
	return fmt.Sprintf("media: %s answered %s: %s", e.what, e.status, e.text)
}

func (e *remoteError) Unwrap() error { return e.cause }

// UserMessage makes a remoteError a usererr.Messager.
func (e *remoteError) UserMessage() string {
	if e.cause != nil {
		return "The media server could not be reached. An admin can check its address on /admin."
	}
	// The engine's own words, capped and with the key masked by errorText.
	return usererr.Capitalize(fmt.Sprintf("%s answered %s: %s", e.what, e.status, e.text))
}

// errorText is the message of an error reply — OpenAI's {"error":
// {"message"}}, FastAPI's {"detail"}, or the raw text — on one line, at
// most 300 characters, with the API key masked should the server echo it.
func (r remote) errorText(body []byte) string {
	var doc struct {
		Error   json.RawMessage `json:"error"`
		Detail  json.RawMessage `json:"detail"`
		Message string          `json:"message"`
	}
	msg := ""
	if json.Unmarshal(body, &doc) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(doc.Error, &nested) == nil && nested.Message != "":
			msg = nested.Message
		case json.Unmarshal(doc.Error, &s) == nil && s != "":
			msg = s
		case json.Unmarshal(doc.Detail, &s) == nil && s != "":
			msg = s
		case len(doc.Detail) > 0:
			msg = string(doc.Detail)
		case doc.Message != "":
			msg = doc.Message
		}
	}
	if msg == "" {
		msg = string(body)
	}
	if r.apiKey != "" {
		msg = strings.ReplaceAll(msg, r.apiKey, "[key]")
	}
	msg = strings.Join(strings.Fields(printable([]byte(msg))), " ")
	if msg == "" {
		return "(no message)"
	}
	return truncateRunes(msg, 300)
}

// printable is b as text with anything unprintable shown as '.'.
func printable(b []byte) string {
	return strings.Map(func(r rune) rune {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return '.'
		}
		return r
	}, strings.ToValidUTF8(string(b), "."))
}
