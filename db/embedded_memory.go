package db

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// memoryLimit is the machine's memory, or the lowest memory limit of this
// process's cgroups when lower (0 when nothing can be read).
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
	self, _ := os.ReadFile("/proc/self/cgroup")
	for _, limit := range cgroupLimits(string(self), readLimit) {
		if limit > 0 && (total == 0 || limit < total) {
			total = limit
		}
	}
	return total
}

// cgroupLimits lists the memory limits that apply to a process whose
// /proc/self/cgroup is self: its cgroup's and every parent's, under
// cgroup v2 ("0::/path", memory.max) and v1 ("N:memory:/path",
// memory.limit_in_bytes), plus the mount's root (a container's own view).
// read returns a file's limit (0: none or unreadable).
func cgroupLimits(self string, read func(path string) int64) []int64 {
	var out []int64
	walk := func(root, rel, file string) {
		for dir := filepath.Clean("/" + rel); ; dir = filepath.Dir(dir) {
			out = append(out, read(filepath.Join(root, dir, file)))
			if dir == "/" {
				return
			}
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(self), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			walk("/sys/fs/cgroup", parts[2], "memory.max")
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			walk("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes")
		}
	}
	if len(out) == 0 {
		out = append(out, read("/sys/fs/cgroup/memory.max"), read("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
	}
	return out
}

// readLimit reads a cgroup memory limit: "max", a missing file or v1's
// "no limit" (a number near 2^63) are 0.
func readLimit(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 || n >= 1<<62 {
		return 0
	}
	return n
}
