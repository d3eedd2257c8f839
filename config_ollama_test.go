package main

import (
	"fmt"
	"strings"
	"testing"
)

// OLLAMA_HOST names one server as Ollama reads it, or several separated
// by commas; a bad list stops start-up with a message.
func TestOllamaHostMayListSeveralServers(t *testing.T) {
	for v, want := range map[string]string{
		"":                             "[http://127.0.0.1:11434]",
		"gpu1":                         "[http://gpu1:11434]",
		"gpu1, gpu2:9000,https://gpu3": "[http://gpu1:11434 http://gpu2:9000 https://gpu3:443]",
	} {
		t.Setenv("OLLAMA_HOST", v)
		c, err := loadConfig()
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if got := fmt.Sprint(appConfig(c).Ollama); got != want {
			t.Errorf("OLLAMA_HOST=%q: servers %s, want %s", v, got, want)
		}
	}
	t.Setenv("OLLAMA_HOST", "gpu1,,gpu2")
	if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), "OLLAMA_HOST") {
		t.Errorf("an empty item: %v", err)
	}
}
