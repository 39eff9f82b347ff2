package sandbox

import (
	"context"
	"reflect"
	"testing"

	"code-sandbox-mcp/config"
	sandboxoci "code-sandbox-mcp/oci"
)

// What a model is told of its sandbox comes from Described; a run's spec
// comes from the same base with the run's facts. Apart from those facts
// (its uid, its directories, its environment), the two specs enforce the
// same: the same posture, read back from each.
func TestDescribedIsARunsPolicyWithoutItsFacts(t *testing.T) {
	lang, ok := config.Default().Language("python")
	if !ok {
		t.Fatal("the default configuration has no python")
	}
	described, err := sandboxoci.Generate(context.Background(), Described(lang))
	if err != nil {
		t.Fatal(err)
	}
	run, err := sandboxoci.Generate(context.Background(), basePolicy(lang, runFacts{
		imageEnv: []string{"PATH=/usr/bin"}, passEnv: nil, uid: 2000000001,
		codeDir: t.TempDir(), workspaceDir: t.TempDir(),
	}))
	if err != nil {
		t.Fatal(err)
	}
	d, r := sandboxoci.Describe(described), sandboxoci.Describe(run)
	if r.UID != 2000000001 || r.GID != 2000000001 {
		t.Errorf("the run's uid and gid: %d, %d; want the run's own", r.UID, r.GID)
	}
	d.UID, d.GID = r.UID, r.GID
	if !reflect.DeepEqual(d, r) {
		t.Errorf("posture described:\n%+v\nposture of a run:\n%+v\nwant the same but the uid", d, r)
	}
}
