package main

import (
	"strings"
	"testing"
)

// WEFT_SEARCH_URL and WEFT_SEARCH_KIND reach the knowledge-base service as
// the search service used until /admin saves one; a URL that is not http(s)
// or with a user name or password, or an unknown kind stops start-up naming
// the variable (and never the password).
func TestWEFTSearchURLSetsTheSearchServiceAndBadValuesStopStartUp(t *testing.T) {
	t.Setenv("WEFT_SEARCH_URL", "http://searxng:8080/")
	c, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got := appConfig(c).RAG.Search; got.URL != "http://searxng:8080" || got.Kind != "searxng" {
		t.Errorf("the search service = %+v", got)
	}
	for env, want := range map[string]string{
		"WEFT_SEARCH_URL=ftp://x":                       "WEFT_SEARCH_URL must be an http or https URL",
		"WEFT_SEARCH_URL=http://searxng:8080/search?q=": "WEFT_SEARCH_URL must be an http or https URL",
		"WEFT_SEARCH_KIND=google":                       "WEFT_SEARCH_KIND must be searxng",
		// A password would be shown back on /admin, whose form refuses it.
		"WEFT_SEARCH_URL=http://weft:s3cret@searxng:8080": "WEFT_SEARCH_URL must not contain a user name or password",
	} {
		k, v, _ := strings.Cut(env, "=")
		t.Setenv("WEFT_SEARCH_URL", "")
		t.Setenv(k, v)
		if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v", env, err)
		}
		t.Setenv(k, "")
	}
}
