package main

import (
	"strings"
	"testing"
)

// WEFT_KB_WEB is on unless set to off, reaches the knowledge-base service,
// and any other value stops start-up with a message naming the choices.
func TestWEFTKBWebTurnsKnowledgeFromTheWebOffAndRefusesOtherValues(t *testing.T) {
	for v, off := range map[string]bool{"": false, "on": false, "off": true} {
		t.Setenv("WEFT_KB_WEB", v)
		c, err := loadConfig()
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if got := appConfig(c).RAG.WebOff; got != off {
			t.Errorf("WEFT_KB_WEB=%q: the service's WebOff is %v", v, got)
		}
	}
	t.Setenv("WEFT_KB_WEB", "no")
	if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), `WEFT_KB_WEB must be on or off`) || !strings.Contains(err.Error(), `"no"`) {
		t.Errorf("WEFT_KB_WEB=no: %v", err)
	}
}
