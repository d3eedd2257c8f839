package db_test

import (
	"context"
	"math"
	"testing"

	"weft/internal/testenv"
)

// A batch of observations weighs as its observations would one by one:
// exactly the mean while the first five are gathered, then as that many
// steps of the moving average.
func TestABatchOfCalibrationSamplesWeighsAsItsSamplesWould(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	steps := []struct {
		mean    float64
		samples int
		want    float64
		total   int
	}{
		{2.0, 3, 2.0, 3},                             // the first three: their mean
		{3.0, 2, 2.4, 5},                             // five in all: (3·2 + 2·3) / 5
		{4.0, 2, 2.4 + 1.6*(1-0.64), 7},              // two more steps of weight 0.2
		{2.976, 1, 2.976, 8},                         // at the estimate: unchanged
		{0, 0, 2.976, 8},                             // nothing observed: nothing written
		{4.976, 1, 2.976 + 2*0.2, 9},                 // one: the usual 0.2
		{1.0, 40, 1.0 + 2.376*math.Pow(0.8, 40), 49}, // many: all but the last trace
	}
	for i, s := range steps {
		if err := store.Calibrate(ctx, "m:latest", s.mean, s.samples); err != nil {
			t.Fatal(err)
		}
		cpt, n, err := store.Calibration(ctx, "m:latest")
		if err != nil {
			t.Fatal(err)
		}
		if n != s.total || math.Abs(cpt-s.want) > 1e-9 {
			t.Errorf("step %d: %.6f after %d samples, want %.6f after %d", i, cpt, n, s.want, s.total)
		}
	}
	if _, n, _ := store.Calibration(ctx, "other:latest"); n != 0 {
		t.Errorf("another model has %d samples, want none", n)
	}
}

// A batch that crosses the fifth sample weighs as its samples would one by
// one: those up to the fifth join the mean, the rest are steps of the
// moving average (not the whole batch as steps of the moving average).
func TestABatchCrossingTheFifthCalibrationSampleWeighsAsItsSamplesOneByOne(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	for _, model := range []string{"batch:latest", "single:latest"} {
		if err := store.Calibrate(ctx, model, 2.0, 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Calibrate(ctx, "batch:latest", 3.0, 4); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := store.Calibrate(ctx, "single:latest", 3.0, 1); err != nil {
			t.Fatal(err)
		}
	}
	batch, n, err := store.Calibration(ctx, "batch:latest")
	if err != nil || n != 7 {
		t.Fatalf("batch: %d samples, %v", n, err)
	}
	single, _, err := store.Calibration(ctx, "single:latest")
	if err != nil {
		t.Fatal(err)
	}
	// One by one: 2 → 2.25 → 2.4 (the mean of five) → 2.52 → 2.616.
	if math.Abs(single-2.616) > 1e-9 || math.Abs(batch-single) > 1e-9 {
		t.Errorf("a batch of four after three samples gives %.6f, one by one %.6f (want 2.616)", batch, single)
	}
}
