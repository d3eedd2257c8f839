package db

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestSharedBuffersAreAnEighthOfTheMemoryWithinBounds(t *testing.T) {
	for _, c := range []struct{ mem, want int64 }{
		{0, 128 << 20},         // unknown: PostgreSQL's default
		{512 << 20, 128 << 20}, // a small box keeps the default
		{4 << 30, 512 << 20},
		{24 << 30, 2 << 30}, // this machine: capped
		{256 << 30, 2 << 30},
	} {
		if got := sharedBuffersFor(c.mem); got != c.want {
			t.Errorf("memory %d MB: shared_buffers %d MB, want %d MB", c.mem>>20, got>>20, c.want>>20)
		}
	}
	t.Setenv("WEFT_PG_SHARED_BUFFERS", "lots")
	if _, err := sharedBuffers(); err == nil {
		t.Error("WEFT_PG_SHARED_BUFFERS=lots was accepted")
	}
}

// The setting reaches the server on every start, an existing cluster's
// included (initdb's postgresql.conf says 128MB).
func TestTheEmbeddedServerStartsWithTheSharedBuffersSetting(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data", "postgres")
	for _, size := range []string{"160MB", "192MB"} {
		t.Setenv("WEFT_PG_SHARED_BUFFERS", size)
		pg, err := StartEmbedded(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, pg.URL)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = conn.QueryRow(ctx, "SHOW shared_buffers").Scan(&got)
		conn.Close(ctx)
		if stopErr := pg.Stop(ctx); stopErr != nil {
			t.Fatal(stopErr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got != size {
			t.Fatalf("started with WEFT_PG_SHARED_BUFFERS=%s: shared_buffers is %s", size, got)
		}
	}
}

// The limits that apply are the process's cgroup's and its parents', under
// cgroup v2 and v1 alike.
func TestCgroupLimitsWalkUpTheHierarchy(t *testing.T) {
	files := map[string]int64{
		"/sys/fs/cgroup/system.slice/memory.max":                 1 << 30,
		"/sys/fs/cgroup/system.slice/weft.service/memory.max":    0, // "max"
		"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": 512 << 20,
		"/sys/fs/cgroup/memory/docker/memory.limit_in_bytes":     0,
		"/sys/fs/cgroup/memory/memory.limit_in_bytes":            0,
	}
	read := func(p string) int64 { return files[p] }
	low := func(ls []int64) int64 {
		var m int64
		for _, l := range ls {
			if l > 0 && (m == 0 || l < m) {
				m = l
			}
		}
		return m
	}
	if got := low(cgroupLimits("0::/system.slice/weft.service\n", read)); got != 1<<30 {
		t.Errorf("cgroup v2 under a 1 GB slice: limit %d MB", got>>20)
	}
	if got := low(cgroupLimits("12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n", read)); got != 512<<20 {
		t.Errorf("cgroup v1 container of 512 MB: limit %d MB", got>>20)
	}
	if got := low(cgroupLimits("", read)); got != 0 {
		t.Errorf("no cgroup: limit %d", got)
	}
}
