package extract

import (
	"strings"
	"testing"
)

func TestEveryChromeTokenIsLookedUp(t *testing.T) {
	for _, table := range []map[string]chromeWhere{htmlChromeTokens, htmlChromeRoles} {
		for tok := range table {
			if len(tok) > maxChromeToken || strings.ToLower(tok) != tok {
				t.Errorf("token %q is longer than %d bytes or not lower case: never matched", tok, maxChromeToken)
			}
		}
	}
}
