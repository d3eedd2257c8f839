package agent

import (
	"os"
	"testing"

	"weft/extract"
)

// Tests here read files through extract's jail, whose child is this test
// binary re-executed.
func TestMain(m *testing.M) {
	extract.ChildMain()
	os.Exit(m.Run())
}
