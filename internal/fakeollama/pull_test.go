package fakeollama

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
)

func tagNames(t *testing.T, c *api.Client) []string {
	t.Helper()
	list, err := c.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range list.Models {
		out = append(out, m.Name)
	}
	return out
}

func TestAPullStreamsOllamasProgressLinesAndTheModelAppearsInTags(t *testing.T) {
	t.Parallel()
	s := New(t, WithRegistry(PullModel{Model: Model{Name: "qwen3:8b", Capabilities: []string{CapCompletion, CapTools}, Family: "qwen3"},
		Layers: []int64{1000, 200}, Steps: 2}))
	c := client(t, s)
	if slices.Contains(tagNames(t, c), "qwen3:8b") {
		t.Fatal("the model is there before its pull")
	}
	var got []api.ProgressResponse
	if err := c.Pull(ctxT(t), &api.PullRequest{Model: "qwen3:8b"}, func(r api.ProgressResponse) error {
		got = append(got, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, r := range got {
		statuses = append(statuses, r.Status)
	}
	d0, d1 := layerDigest("qwen3:8b", 0), layerDigest("qwen3:8b", 1)
	want := []string{"pulling manifest",
		"pulling " + d0[7:19], "pulling " + d0[7:19], "pulling " + d0[7:19],
		"pulling " + d1[7:19], "pulling " + d1[7:19], "pulling " + d1[7:19],
		"verifying sha256 digest", "writing manifest", "success"}
	if !slices.Equal(statuses, want) {
		t.Fatalf("statuses = %q\nwant %q", statuses, want)
	}
	if l := got[2]; l.Digest != d0 || l.Total != 1000 || l.Completed != 500 || !strings.HasPrefix(l.Digest, "sha256:") {
		t.Errorf("a layer's line = %+v", l)
	}
	if l := got[6]; l.Digest != d1 || l.Completed != 200 || l.Total != 200 {
		t.Errorf("the last layer's last line = %+v", l)
	}
	if !slices.Contains(tagNames(t, c), "qwen3:8b") {
		t.Fatalf("after the pull /api/tags = %v", tagNames(t, c))
	}
	show, err := c.Show(ctxT(t), &api.ShowRequest{Model: "qwen3:8b"})
	if err != nil || show.Details.Family != "qwen3" || len(show.Capabilities) != 2 {
		t.Fatalf("show = %+v, %v", show, err)
	}
	p := s.Pulls()
	if len(p) != 1 || !p[0].Completed || !p[0].Done || p[0].Lines != len(want) || p[0].Cancelled {
		t.Fatalf("records = %+v", p)
	}
}

func TestAPullOfAModelTheRegistryLacksFailsWithOllamasManifestError(t *testing.T) {
	t.Parallel()
	s := New(t)
	c := client(t, s)
	var lines []string
	err := c.Pull(ctxT(t), &api.PullRequest{Model: "no-such-model"}, func(r api.ProgressResponse) error {
		lines = append(lines, r.Status)
		return nil
	})
	if err == nil || err.Error() != "pull model manifest: file does not exist" {
		t.Fatalf("err = %v", err)
	}
	if !slices.Equal(lines, []string{"pulling manifest"}) {
		t.Errorf("lines before the error = %q", lines)
	}
	// An invalid name is refused before the stream, with a 400.
	err = c.Pull(ctxT(t), &api.PullRequest{Model: "bad name"}, func(api.ProgressResponse) error { return nil })
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusBadRequest || se.ErrorMessage != "invalid model name" {
		t.Fatalf("invalid name: %v", err)
	}
	if p := s.Pulls(); len(p) != 1 || p[0].Error != "pull model manifest: file does not exist" || p[0].Completed {
		t.Fatalf("records = %+v", p)
	}
}

func TestAHeldPullWaitsUntilReleasedAndSeesItsClientLeave(t *testing.T) {
	t.Parallel()
	s := New(t, WithRegistry(PullModel{Model: Model{Name: "big"}, Layers: []int64{1 << 30}, Steps: 10}))
	s.HoldPulls(3)
	c := client(t, s)
	ctx, cancel := context.WithCancel(ctxT(t))
	lines := make(chan api.ProgressResponse, 100)
	done := make(chan error, 1)
	go func() {
		done <- c.Pull(ctx, &api.PullRequest{Model: "big"}, func(r api.ProgressResponse) error { lines <- r; return nil })
	}()
	if err := s.WaitPulls(ctxT(t), func(p []PullRecord) bool { return len(p) == 1 && p[0].Lines == 3 }); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-lines
	}
	select {
	case r := <-lines:
		t.Fatalf("a held pull sent %+v", r)
	default:
	}
	s.HoldPulls(5) // a held pull goes on to the new hold
	if err := s.WaitPulls(ctxT(t), func(p []PullRecord) bool { return p[0].Lines == 5 }); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := s.WaitPulls(ctxT(t), func(p []PullRecord) bool { return p[0].Done }); err != nil {
		t.Fatal(err)
	}
	if p := s.Pulls()[0]; !p.Cancelled || p.Completed {
		t.Fatalf("record = %+v", p)
	}
	<-done
	if slices.Contains(tagNames(t, c), "big:latest") {
		t.Fatal("a cancelled pull left its model")
	}
	// Released, a new pull runs to the end.
	s.ReleasePulls()
	if err := c.Pull(ctxT(t), &api.PullRequest{Model: "big"}, func(api.ProgressResponse) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tagNames(t, c), "big:latest") {
		t.Fatal("the pull did not add the model")
	}
}

func TestDeleteRemovesAModelAndUnknownOnesAre404(t *testing.T) {
	t.Parallel()
	s := New(t)
	c := client(t, s)
	if err := c.Delete(ctxT(t), &api.DeleteRequest{Model: "tiny"}); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(tagNames(t, c), "tiny:latest") {
		t.Fatal("tiny is still listed")
	}
	err := c.Delete(ctxT(t), &api.DeleteRequest{Model: "tiny"})
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 || se.ErrorMessage != "model 'tiny' not found" {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := c.Show(ctxT(t), &api.ShowRequest{Model: "tiny"}); err == nil {
		t.Fatal("show of a deleted model answers")
	}
	if d := s.Deleted(); !slices.Equal(d, []string{"tiny:latest"}) {
		t.Fatalf("deleted = %v", d)
	}
}

// As Ollama's DeleteHandler: a loaded model deleted stays in memory (its
// runner is not expired), and unloading it is then 404.
func TestDeletingALoadedModelLeavesItInPsWhereUnloadCannotReachIt(t *testing.T) {
	t.Parallel()
	s := New(t)
	c := client(t, s)
	if err := c.Generate(ctxT(t), &api.GenerateRequest{Model: "tiny"}, func(api.GenerateResponse) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctxT(t), &api.DeleteRequest{Model: "tiny"}); err != nil {
		t.Fatal(err)
	}
	if ps, err := c.ListRunning(ctxT(t)); err != nil || len(ps.Models) != 1 || ps.Models[0].Name != "tiny:latest" {
		t.Fatalf("ps after delete = %+v, %v", ps, err)
	}
	err := c.Generate(ctxT(t), &api.GenerateRequest{Model: "tiny", KeepAlive: &api.Duration{}}, func(api.GenerateResponse) error { return nil })
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 {
		t.Fatalf("unload after delete: %v", err)
	}
}

func TestPsListsLoadedModelsAndAnEmptyGenerateWithKeepAliveZeroUnloads(t *testing.T) {
	t.Parallel()
	s := New(t)
	c := client(t, s)
	var resp api.GenerateResponse
	if err := c.Generate(ctxT(t), &api.GenerateRequest{Model: "tiny"}, func(r api.GenerateResponse) error { resp = r; return nil }); err != nil {
		t.Fatal(err)
	}
	if resp.DoneReason != "load" || !resp.Done {
		t.Fatalf("load = %+v", resp)
	}
	ps, err := c.ListRunning(ctxT(t))
	if err != nil || len(ps.Models) != 1 {
		t.Fatalf("ps = %+v, %v", ps, err)
	}
	if m := ps.Models[0]; m.Name != "tiny:latest" || m.Size <= 0 || m.SizeVRAM != m.Size || !m.ExpiresAt.After(time.Now()) || m.ContextLength != 4096 {
		t.Fatalf("loaded = %+v", m)
	}
	if err := c.Generate(ctxT(t), &api.GenerateRequest{Model: "tiny", KeepAlive: &api.Duration{}}, func(r api.GenerateResponse) error { resp = r; return nil }); err != nil {
		t.Fatal(err)
	}
	if resp.DoneReason != "unload" {
		t.Fatalf("unload = %+v", resp)
	}
	if ps, err := c.ListRunning(ctxT(t)); err != nil || len(ps.Models) != 0 {
		t.Fatalf("ps after unload = %+v, %v", ps, err)
	}
	err = c.Generate(ctxT(t), &api.GenerateRequest{Model: "nope", KeepAlive: &api.Duration{}}, func(api.GenerateResponse) error { return nil })
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 {
		t.Fatalf("unknown model: %v", err)
	}
}
