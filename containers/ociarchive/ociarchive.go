// Package ociarchive writes a container image as an OCI image-layout tar
// archive, the format containerd's client.Import reads: one uncompressed
// layer made from a root file system tar, the image config, the manifest,
// and an index.json that names the image. The same tar also carries a
// docker-archive manifest.json naming the same config and layer blobs, so
// that `docker load` (which before Docker 25 reads only that format) takes
// it too; containerd and podman read the OCI layout and ignore it.
//
// It is for images built without a registry or a build daemon. It knows
// the OCI image format, not containerd, not how the root file system was
// made and not the server that runs the image.
package ociarchive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/distribution/reference"
	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"code-sandbox-mcp/containers/imageref"
)

// annotationImageName is the index annotation containerd's importer takes
// as the image's name in its image store.
const annotationImageName = "io.containerd.image.name"

// dockerManifestFile is the docker-archive manifest at the archive's root,
// the file `docker load` reads.
const dockerManifestFile = "manifest.json"

// dockerManifest is one image of a docker-archive manifest.json: paths in
// the archive of its config and its layers (bottom first), and the names
// docker tags it with.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// Image is what the archive says about the image besides its files.
type Image struct {
	// Ref is the image's full reference with a tag, such as
	// localhost/code-sandbox-mcp/python:trixie. A short name such as
	// python:3 is refused: importers would store it under a name nobody
	// asked for.
	Ref string
	// Env is the default environment, as KEY=value.
	Env []string
	// WorkingDir is the default working directory.
	WorkingDir string
	// Entrypoint and Cmd are the default command.
	Entrypoint []string
	Cmd        []string
	// User is the default user, such as "65534:65534"; empty means root.
	User string
	// Labels are the config's labels.
	Labels map[string]string
	// Created is the image's creation time; the zero time leaves it out,
	// so the same root file system always packs to the same archive.
	Created time.Time
}

// Pack writes img, whose only layer is the uncompressed tar rootfs, to w as
// an OCI image-layout tar archive with a docker-archive manifest.json.
//
// The layer is streamed, never held in memory: the layer's digest must be
// known before its bytes are written, so rootfs is read twice when it is an
// io.ReadSeeker (such as an *os.File) and is otherwise copied to a
// temporary file on the way through. rootfs must be a tar archive; a
// compressed one is refused.
func Pack(w io.Writer, rootfs io.Reader, img Image) error {
	named, familiar, tag, err := parseRef(img.Ref)
	if err != nil {
		return err
	}

	layer, err := spool(rootfs)
	if err != nil {
		return err
	}
	defer layer.close()

	platform := ocispec.Platform{Architecture: runtime.GOARCH, OS: "linux"}
	config, err := configBlob(img, platform, layer.digest)
	if err != nil {
		return err
	}
	manifest, err := manifestBlob(config.desc, layer, platform, named, tag)
	if err != nil {
		return err
	}
	index, err := json.Marshal(ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{manifest.desc},
	})
	if err != nil {
		return fmt.Errorf("encode index: %w", err)
	}
	docker, err := json.Marshal([]dockerManifest{{
		Config:   blobPath(config.desc.Digest),
		RepoTags: []string{familiar},
		Layers:   []string{blobPath(layer.digest)},
	}})
	if err != nil {
		return fmt.Errorf("encode %s: %w", dockerManifestFile, err)
	}
	return writeArchive(w, layer, []jsonBlob{config, manifest}, index, docker)
}

// jsonBlob is a JSON blob of the archive (a config, a manifest) and its
// descriptor.
type jsonBlob struct {
	data []byte
	desc ocispec.Descriptor
}

// configBlob is img's config, on platform, whose one layer has diffID.
func configBlob(img Image, platform ocispec.Platform, diffID digest.Digest) (jsonBlob, error) {
	config := ocispec.Image{
		Platform: platform,
		Config: ocispec.ImageConfig{
			User:       img.User,
			Env:        img.Env,
			Entrypoint: img.Entrypoint,
			Cmd:        img.Cmd,
			WorkingDir: img.WorkingDir,
			Labels:     img.Labels,
		},
		RootFS: ocispec.RootFS{
			Type:    "layers",
			DiffIDs: []digest.Digest{diffID},
		},
	}
	if !img.Created.IsZero() {
		created := img.Created.UTC()
		config.Created = &created
	}
	data, desc, err := marshalBlob(ocispec.MediaTypeImageConfig, config)
	return jsonBlob{data, desc}, err
}

// manifestBlob is the manifest of the config and the one layer, its
// descriptor annotated with the image's name (as containerd reads it)
// and tag (as the OCI layout does).
func manifestBlob(config ocispec.Descriptor, layer *spooled, platform ocispec.Platform, named, tag string) (jsonBlob, error) {
	data, desc, err := marshalBlob(ocispec.MediaTypeImageManifest, ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    config,
		Layers: []ocispec.Descriptor{{
			MediaType: ocispec.MediaTypeImageLayer,
			Digest:    layer.digest,
			Size:      layer.size,
		}},
	})
	if err != nil {
		return jsonBlob{}, err
	}
	desc.Platform = &platform
	desc.Annotations = map[string]string{
		annotationImageName:       named,
		ocispec.AnnotationRefName: tag,
	}
	return jsonBlob{data, desc}, nil
}

// writeArchive writes the archive's tar to w: the oci-layout file, the
// layer and the small blobs, the index, and the docker-archive manifest.
func writeArchive(w io.Writer, layer *spooled, blobs []jsonBlob, index, docker []byte) error {
	layoutJSON, err := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err != nil {
		return fmt.Errorf("encode oci-layout: %w", err)
	}
	tw := tar.NewWriter(w)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(dirHeader(dir)); err != nil {
			return fmt.Errorf("write archive: %w", err)
		}
	}
	if err := writeFile(tw, ocispec.ImageLayoutFile, bytes.NewReader(layoutJSON), int64(len(layoutJSON))); err != nil {
		return err
	}
	r, err := layer.open()
	if err != nil {
		return err
	}
	if err := writeFile(tw, blobPath(layer.digest), r, layer.size); err != nil {
		return err
	}
	for _, b := range blobs {
		if err := writeFile(tw, blobPath(b.desc.Digest), bytes.NewReader(b.data), b.desc.Size); err != nil {
			return err
		}
	}
	if err := writeFile(tw, ocispec.ImageIndexFile, bytes.NewReader(index), int64(len(index))); err != nil {
		return err
	}
	if err := writeFile(tw, dockerManifestFile, bytes.NewReader(docker), int64(len(docker))); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	return nil
}

// parseRef checks that ref is a full reference with a tag and no digest
// (see imageref.Tagged), and returns it, its familiar form (as docker
// prints it: docker.io/library/ left out) and its tag.
func parseRef(ref string) (named, familiar, tag string, err error) {
	t, err := imageref.Tagged(ref)
	if err != nil {
		return "", "", "", err
	}
	return t.String(), reference.FamiliarString(t), t.Tag(), nil
}

// marshalBlob encodes v as JSON and describes it as a blob of mediaType.
func marshalBlob(mediaType string, v any) ([]byte, ocispec.Descriptor, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, ocispec.Descriptor{}, fmt.Errorf("encode %s: %w", mediaType, err)
	}
	return b, ocispec.Descriptor{
		MediaType: mediaType,
		Digest:    digest.FromBytes(b),
		Size:      int64(len(b)),
	}, nil
}

func blobPath(d digest.Digest) string {
	return "blobs/" + d.Algorithm().String() + "/" + d.Encoded()
}

// epoch is every archive entry's time, so that equal inputs pack to equal
// archives.
var epoch = time.Unix(0, 0).UTC()

func dirHeader(name string) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: epoch}
}

func writeFile(tw *tar.Writer, name string, r io.Reader, size int64) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: epoch}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	n, err := io.Copy(tw, r)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if n != size {
		return fmt.Errorf("write %s: wrote %d bytes; want %d: the root file system changed while being packed", name, n, size)
	}
	return nil
}

// spooled is the layer, measured, and a way to read it again.
type spooled struct {
	digest digest.Digest
	size   int64
	open   func() (io.Reader, error)
	close  func()
}

// spool reads rootfs once to learn its digest and size, checking on the way
// that it is a tar archive. An io.ReadSeeker is read again from its start;
// anything else is kept in a temporary file.
func spool(rootfs io.Reader) (*spooled, error) {
	if rs, ok := rootfs.(io.ReadSeeker); ok {
		start, err := rs.Seek(0, io.SeekCurrent)
		if err == nil {
			d, n, err := measure(rs, io.Discard)
			if err != nil {
				return nil, err
			}
			return &spooled{
				digest: d,
				size:   n,
				open: func() (io.Reader, error) {
					if _, err := rs.Seek(start, io.SeekStart); err != nil {
						return nil, fmt.Errorf("rewind root file system: %w", err)
					}
					return rs, nil
				},
				close: func() {},
			}, nil
		}
		// Not seekable after all (a pipe behind an *os.File): spool it.
	}

	f, err := os.CreateTemp("", "ociarchive-layer-*.tar")
	if err != nil {
		return nil, fmt.Errorf("spool root file system: %w; set TMPDIR to a directory with room for it", err)
	}
	cleanup := func() {
		f.Close()
		os.Remove(f.Name())
	}
	d, n, err := measure(rootfs, f)
	if err != nil {
		cleanup()
		return nil, err
	}
	return &spooled{
		digest: d,
		size:   n,
		open: func() (io.Reader, error) {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return nil, fmt.Errorf("rewind spooled root file system: %w", err)
			}
			return f, nil
		},
		close: cleanup,
	}, nil
}

// measure copies r to w, returning the sha256 digest and size of what it
// copied, and fails unless r is an uncompressed tar archive.
func measure(r io.Reader, w io.Writer) (digest.Digest, int64, error) {
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(h, w)}
	tee := io.TeeReader(r, cw)

	var buf [4]byte
	n, _ := io.ReadFull(tee, buf[:])
	magic := buf[:n]
	if isCompressed(magic) {
		return "", 0, errors.New("root file system is compressed; pass an uncompressed tar")
	}
	// Put the magic back in front of the rest for the tar reader; it has
	// already been counted and hashed. The tar reader must not see an
	// io.Seeker, or it would skip file contents past the hash.
	tr := tar.NewReader(io.MultiReader(bytes.NewReader(magic), tee))
	entries := 0
	for {
		_, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", 0, fmt.Errorf("root file system is not a valid tar archive: %w", err)
		}
		entries++
	}
	if entries == 0 {
		return "", 0, errors.New("root file system is an empty tar archive")
	}
	// The tar reader stops at the end-of-archive marker; the layer is
	// every byte, padding included.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return "", 0, fmt.Errorf("read root file system: %w", err)
	}
	return digestOf(h), cw.n, nil
}

func isCompressed(magic []byte) bool {
	for _, m := range [][]byte{
		{0x1f, 0x8b},             // gzip
		{0x28, 0xb5, 0x2f, 0xfd}, // zstd
		{'B', 'Z', 'h'},          // bzip2
		{0xfd, '7', 'z', 'X'},    // xz
	} {
		if bytes.HasPrefix(magic, m) {
			return true
		}
	}
	return false
}

func digestOf(h hash.Hash) digest.Digest {
	return digest.NewDigestFromBytes(digest.SHA256, h.Sum(nil))
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
