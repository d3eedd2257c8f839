package db

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// The embedded server's shared_buffers, given to every start (pg_ctl -o),
// so it follows the machine rather than what initdb wrote. PostgreSQL's
// 128 MB default holds a knowledge base's vector index only up to about
// 100,000 chunks; past it every HNSW insert and search reads its pages
// through the kernel. The usual advice is a quarter of the memory for a
// dedicated server; Weft shares the machine with the models, so an eighth,
// between 128 MB and 2 GB. WEFT_PG_SHARED_BUFFERS (PostgreSQL's units:
// "512MB", "1GB") overrides it.
const (
	minSharedBuffers = 128 << 20
	maxSharedBuffers = 2 << 30
)

var pgSize = regexp.MustCompile(`^[0-9]+(kB|MB|GB|TB)$`)

// sharedBuffers returns the setting to start the server with.
func sharedBuffers() (string, error) {
	if v := strings.TrimSpace(os.Getenv("WEFT_PG_SHARED_BUFFERS")); v != "" {
		if !pgSize.MatchString(v) {
			return "", fmt.Errorf("WEFT_PG_SHARED_BUFFERS=%q: want a size such as 512MB or 2GB", v)
		}
		return v, nil
	}
	return fmt.Sprintf("%dMB", sharedBuffersFor(memoryLimit())>>20), nil
}

// sharedBuffersFor is an eighth of mem, within the bounds (mem 0: unknown).
func sharedBuffersFor(mem int64) int64 {
	return min(max(mem/8, minSharedBuffers), maxSharedBuffers)
}

// memoryLimit is the machine's memory, or the cgroup's limit when lower
// (0 when neither can be read).
func memoryLimit() int64 {
	var total int64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				total = kb << 10
			}
		}
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
			total = n
		}
	}
	return total
}
