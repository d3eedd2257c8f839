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
