package handlers_test

import (
	"testing"

	"weft/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
