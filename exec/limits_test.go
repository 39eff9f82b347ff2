package exec

import (
	"testing"

	"code-sandbox-mcp/oci"
)

// Every rlimit a spec sets is clamped to the server's own hard limit:
// hardLimits must know each.
func TestHardLimitsKnowEveryRlimitOfTheSpec(t *testing.T) {
	hard := hardLimits()
	for _, typ := range oci.RlimitTypes() {
		if _, ok := hard[typ]; !ok {
			t.Errorf("hardLimits has no %s", typ)
		}
	}
}
