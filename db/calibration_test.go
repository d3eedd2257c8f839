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
