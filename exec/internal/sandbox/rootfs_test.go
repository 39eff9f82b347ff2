package sandbox

import (
	"reflect"
	"testing"

	"github.com/containerd/containerd/v2/core/mount"
)

func TestWithVolatile(t *testing.T) {
	upper := mount.Mount{Type: "overlay", Source: "overlay", Options: []string{"index=off", "workdir=/s/1/work", "upperdir=/s/1/fs", "lowerdir=/s/0/fs"}}
	readOnly := mount.Mount{Type: "overlay", Source: "overlay", Options: []string{"lowerdir=/s/1/fs:/s/0/fs"}}
	bind := mount.Mount{Type: "bind", Source: "/s/0/fs", Options: []string{"ro", "rbind"}}
	already := mount.Mount{Type: "overlay", Source: "overlay", Options: []string{"upperdir=/s/2/fs", "volatile"}}
	in := []mount.Mount{upper, readOnly, bind, already}
	got := withVolatile(in)
	want := []mount.Mount{
		{Type: "overlay", Source: "overlay", Options: []string{"index=off", "workdir=/s/1/work", "upperdir=/s/1/fs", "lowerdir=/s/0/fs", "volatile"}},
		readOnly, bind, already,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("withVolatile:\n got %v\nwant %v", got, want)
	}
	if len(in[0].Options) != 4 {
		t.Errorf("withVolatile changed its input: %v", in[0].Options)
	}
}
