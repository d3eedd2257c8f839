package main

import (
	"strings"
	"testing"
	"time"

	"weft/sandbox"
)

// The shell is on with the documented limits unless WEFT_SHELL=off; each
// limit comes from its variable, and a bad value stops start-up naming it.
func TestWEFTShellVariablesSetTheSandboxesLimitsAndOffTurnsItOff(t *testing.T) {
	c, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	got := appConfig(c).Shell
	want := sandbox.Config{CPU: 30 * time.Second, Memory: 512 << 20, Processes: 64, FileSize: 64 << 20,
		Timeout: 60 * time.Second, Output: 64 << 10, MaxFiles: 20000, Workers: 4}
	if got == nil || *got != want {
		t.Fatalf("defaults: %+v, want %+v", got, want)
	}
	for k, v := range map[string]string{"WEFT_SHELL": "off", "WEFT_SHELL_TIMEOUT_SECONDS": "120", "WEFT_SHELL_CPU_SECONDS": "5",
		"WEFT_SHELL_MEMORY_MB": "256", "WEFT_SHELL_PROCESSES": "32", "WEFT_SHELL_FILE_MB": "8", "WEFT_SHELL_OUTPUT_KB": "16",
		"WEFT_SHELL_MAX_FILES": "500", "WEFT_SHELL_WORKERS": "2"} {
		t.Setenv(k, v)
	}
	if c, err = loadConfig(); err != nil {
		t.Fatal(err)
	}
	want = sandbox.Config{Off: true, CPU: 5 * time.Second, Memory: 256 << 20, Processes: 32, FileSize: 8 << 20,
		Timeout: 120 * time.Second, Output: 16 << 10, MaxFiles: 500, Workers: 2}
	if got := appConfig(c).Shell; *got != want {
		t.Fatalf("set: %+v, want %+v", *got, want)
	}
	for k, v := range map[string]string{"WEFT_SHELL": "no", "WEFT_SHELL_PROCESSES": "1", "WEFT_SHELL_MEMORY_MB": "lots"} {
		t.Run(k, func(t *testing.T) {
			t.Setenv(k, v)
			if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), k) || !strings.Contains(err.Error(), `"`+v+`"`) {
				t.Fatalf("%s=%s: %v", k, v, err)
			}
		})
	}
}
