package main

import (
	"fmt"
	"os"
	"time"

	"weft/sandbox"
)

// shellConfig reads the sandboxed shell's settings (README "Sandboxed
// shell"): WEFT_SHELL=off turns run_command off; the rest are its limits.
func shellConfig() (sandbox.Config, error) {
	var c sandbox.Config
	switch v := os.Getenv("WEFT_SHELL"); v {
	case "", "on":
	case "off":
		c.Off = true
	default:
		return c, fmt.Errorf("WEFT_SHELL must be on or off (the agent's sandboxed run_command tool), got %q", v)
	}
	timeout, err := envInt("WEFT_SHELL_TIMEOUT_SECONDS", int(sandbox.DefaultTimeout/time.Second), 1)
	if err != nil {
		return c, err
	}
	cpu, err := envInt("WEFT_SHELL_CPU_SECONDS", int(sandbox.DefaultCPU/time.Second), 1)
	if err != nil {
		return c, err
	}
	mem, err := envInt[int64]("WEFT_SHELL_MEMORY_MB", sandbox.DefaultMemory>>20, 16)
	if err != nil {
		return c, err
	}
	file, err := envInt[int64]("WEFT_SHELL_FILE_MB", sandbox.DefaultFileSize>>20, 1)
	if err != nil {
		return c, err
	}
	out, err := envInt("WEFT_SHELL_OUTPUT_KB", sandbox.DefaultOutput>>10, 1)
	if err != nil {
		return c, err
	}
	if c.Processes, err = envInt("WEFT_SHELL_PROCESSES", sandbox.DefaultProcesses, 4); err != nil {
		return c, err
	}
	if c.MaxFiles, err = envInt("WEFT_SHELL_MAX_FILES", sandbox.DefaultMaxFiles, 100); err != nil {
		return c, err
	}
	if c.Workers, err = envInt("WEFT_SHELL_WORKERS", sandbox.DefaultWorkers, 1); err != nil {
		return c, err
	}
	c.Timeout, c.CPU = time.Duration(timeout)*time.Second, time.Duration(cpu)*time.Second
	c.Memory, c.FileSize, c.Output = mem<<20, file<<20, out<<10
	return c, nil
}
