package extract

import (
	"os"
	"testing"
)

// The jail's tests re-execute this test binary as the child.
func TestMain(m *testing.M) {
	ChildMain()
	os.Exit(m.Run())
}
