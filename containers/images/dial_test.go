package images

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/errdefs"
)

func TestCheckSocket(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })

	for _, tc := range []struct {
		name, address string
		want          error
	}{
		{"missing", filepath.Join(dir, "missing"), errdefs.ErrUnavailable},
		{"not a socket", file, errdefs.ErrInvalidArgument},
		{"socket", sock, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkSocket(tc.address)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("checkSocket(%s) = %v; want %v", tc.address, err, tc.want)
			}
		})
	}
}
