package importer_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"weft/db"
	"weft/importer"
	"weft/internal/jobs"
	"weft/internal/testenv"
	"weft/internal/testwait"
	"weft/internal/usererr"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// An import whose previous life (another instance, or this one before a
// crash) imported its first conversation and died resumes after it: the
// queue starts, the job goes on from next_index, and nothing is imported
// twice.
func TestAnImportInterruptedByARestartResumesWhereItStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws, err := store.CreateUser(ctx, "restart@example.com", "R", "x")
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobs.New(store.Pool, jobs.Config{Queues: map[string]int{importer.Queue: 1}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := importer.New(store, q, importer.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/chatgpt_conversations.json")
	if err != nil {
		t.Fatal(err)
	}
	imp, err := svc.Start(ctx, u.ID, ws.ID, importer.FormatChatGPT, "conversations.json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	// The previous life: counted, imported the first conversation, died.
	sc := importer.NewScanner(bytes.NewReader(data), importer.Limits{})
	raw, err := sc.Next()
	if err != nil {
		t.Fatal(err)
	}
	first, err := importer.ParseChatGPT(raw, importer.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.StartImport(ctx, imp.ID, 4); err != nil {
		t.Fatal(err)
	}
	if err := store.RecordImport(ctx, imp.ID, db.ImportOutcome{Position: 0, Title: first.Thread.Title, Thread: &first.Thread}); err != nil {
		t.Fatal(err)
	}

	testenv.StartJobs(t, q) // the restart
	testwait.For(t, "the import to end", 30*time.Second, func() bool {
		imp, err = store.UserImport(ctx, u.ID, imp.ID)
		if err != nil {
			t.Fatal(err)
		}
		return imp.Finished()
	})
	if imp.Status != db.ImportDone || imp.Imported != 3 || imp.Skipped != 1 || imp.NextIndex != 4 {
		t.Fatalf("import %+v", imp)
	}
	threads, _, err := store.SidebarThreads(ctx, u.ID, ws.ID, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, th := range threads {
		seen[th.Title]++
	}
	if len(threads) != 3 || seen["Steeping tea ☕ お茶"] != 1 {
		t.Errorf("threads after the restart: %v", seen)
	}
}

// A user's unfinished imports are capped: each holds its file in the
// database until its job has read it.
func TestAUserHasAtMostThreeImportsUnderWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws, err := store.CreateUser(ctx, "many@example.com", "M", "x")
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobs.New(store.Pool, jobs.Config{Queues: map[string]int{importer.Queue: 1}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := importer.New(store, q, importer.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	file := func() *bytes.Reader { return bytes.NewReader([]byte(`[{"title":"t","mapping":{}}]`)) }
	for range importer.MaxPending {
		if _, err := svc.Start(ctx, u.ID, ws.ID, importer.FormatChatGPT, "c.json", file()); err != nil {
			t.Fatal(err)
		}
	}
	_, err = svc.Start(ctx, u.ID, ws.ID, importer.FormatChatGPT, "c.json", file())
	if msg, ok := usererr.Message(err); !ok || !strings.Contains(msg, "3 imports under way") {
		t.Fatalf("a fourth import: %v", err)
	}
	// Once they have run, there is room again.
	testenv.StartJobs(t, q)
	testwait.For(t, "the imports to end", 30*time.Second, func() bool {
		imps, err := store.Imports(ctx, u.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range imps {
			if !imp.Finished() {
				return false
			}
		}
		return true
	})
	if _, err := svc.Start(ctx, u.ID, ws.ID, importer.FormatChatGPT, "c.json", file()); err != nil {
		t.Fatal(err)
	}
}

// Stopping an import ends it before its next conversation: its job, when
// it runs, imports nothing more, and the stored file is gone.
func TestAStoppedImportImportsNothingMore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws, err := store.CreateUser(ctx, "stop@example.com", "S", "x")
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobs.New(store.Pool, jobs.Config{Queues: map[string]int{importer.Queue: 1}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := importer.New(store, q, importer.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/chatgpt_conversations.json")
	if err != nil {
		t.Fatal(err)
	}
	imp, err := svc.Start(ctx, u.ID, ws.ID, importer.FormatChatGPT, "conversations.json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.StopImport(ctx, u.ID+1, imp.ID); err != db.ErrNotFound {
		t.Errorf("another user stopped it: %v", err)
	}
	if err := store.StopImport(ctx, u.ID, imp.ID); err != nil {
		t.Fatal(err)
	}
	testenv.StartJobs(t, q)
	var jobState string
	testwait.For(t, "the job to run", 30*time.Second, func() bool {
		if err := store.Pool.QueryRow(ctx, `SELECT state FROM river_job WHERE kind = 'conversation_import'`).Scan(&jobState); err != nil {
			t.Fatal(err)
		}
		return jobState == "completed"
	})
	imp, err = store.UserImport(ctx, u.ID, imp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if imp.Status != db.ImportFailed || imp.Imported != 0 || !strings.HasPrefix(imp.Error, "Stopped.") {
		t.Errorf("import %+v", imp)
	}
	threads, _, err := store.SidebarThreads(ctx, u.ID, ws.ID, nil, 10)
	if err != nil || len(threads) != 0 {
		t.Errorf("threads %v %v", threads, err)
	}
	if _, err := store.ImportChunk(ctx, imp.ID, 0); err != db.ErrNotFound {
		t.Errorf("the file is kept: %v", err)
	}
}
