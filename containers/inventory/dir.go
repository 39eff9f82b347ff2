package inventory

import (
	"io/fs"
	"os"

	cfs "github.com/containerd/continuity/fs"
)

// Dir returns the root file system of an image, mounted at dir, as an
// fs.FS whose links, absolute ones included, resolve inside dir as they
// would in a container of the image: no path leads out of it, and a link
// such as /usr/lib/nodejs -> /usr/share/nodejs reads the image's files,
// not the host's. The tree must not change while it is read (a read-only
// mount does not).
func Dir(dir string) fs.FS { return rootFS(dir) }

type rootFS string

func (r rootFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	p, err := cfs.RootPath(string(r), name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return os.Open(p)
}
