package mcp_test

import (
	"testing"

	"weft/internal/testenv"
)

// TestMain is also the stdio MCP server the tests start (testenv.Main runs
// mcptest.ChildMain first).
func TestMain(m *testing.M) { testenv.Main(m) }
