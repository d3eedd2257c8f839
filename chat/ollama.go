package chat

import (
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/ollama/ollama/api"
)

// NewOllamaClient returns the official client for the server at base, with
// a transport fit for many long streams: a connect timeout, enough idle
// connections for concurrent runs, and no overall timeout (an answer may
// take minutes; Stop cancels it through its context).
func NewOllamaClient(base *url.URL) *api.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return api.NewClient(base, &http.Client{Transport: tr})
}
