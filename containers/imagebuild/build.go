package imagebuild

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/diff"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	digest "github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Options is one build.
type Options struct {
	// Base is the image reference to build on, in the client's namespace.
	Base string
	// Tag is the new image's reference; empty means DefaultTag's.
	Tag string
	// Request is what to add.
	Request Request
	// Env is the environment of the host's apt-get, pip and npm.
	Env []string
	// Log gets progress and the package tools' output.
	Log io.Writer
}

// Manifest is packages.json: what a build added to its base.
type Manifest struct {
	From string    `json:"from"`
	Apt  []Package `json:"apt"`
	Pip  []Package `json:"pip"`
	Npm  []Package `json:"npm"`
}

// DefaultTag is localhost/code-sandbox-mcp/NAME-custom:KEY12, NAME being
// the base's repository's last element.
func DefaultTag(base, key string) string {
	name := base
	if i := lastIndexAny(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	if i := lastIndexAny(name, ":@"); i >= 0 {
		name = name[:i]
	}
	return "localhost/code-sandbox-mcp/" + name + "-custom:" + key[:12]
}

func lastIndexAny(s, chars string) int {
	for i := len(s) - 1; i >= 0; i-- {
		for j := 0; j < len(chars); j++ {
			if s[i] == chars[j] {
				return i
			}
		}
	}
	return -1
}

// Result is a build's outcome.
type Result struct {
	Ref string
	// UpToDate says the image was there already, built from the same
	// base with the same request; nothing was done.
	UpToDate bool
}

// Build builds o.Request on o.Base and stores the result under o.Tag.
func Build(ctx context.Context, c *containerd.Client, o Options) (Result, error) {
	base, err := c.GetImage(ctx, o.Base)
	if errdefs.IsNotFound(err) {
		return Result{}, fmt.Errorf("base image %s is not in containerd: %w; make it with `make images` and `code-sandbox-mcp images import`, or name another with --from", o.Base, err)
	}
	if err != nil {
		return Result{}, fmt.Errorf("base image %s: %w", o.Base, err)
	}
	key := Key(base.Target().Digest.String(), o.Request)
	tag := o.Tag
	if tag == "" {
		tag = DefaultTag(o.Base, key)
	}
	if old, err := c.ImageService().Get(ctx, tag); err == nil && old.Labels[LabelBuildKey] == key {
		fmt.Fprintf(o.Log, "build: %s is up to date (built from %s with the same packages)\n", tag, o.Base)
		return Result{Ref: tag, UpToDate: true}, nil
	}

	ctx, done, err := c.WithLease(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("lease: %w", err)
	}
	defer cleanup(ctx, o.Log, func(ctx context.Context) error { return done(ctx) })

	fmt.Fprintf(o.Log, "build: unpacking %s\n", o.Base)
	if err := base.Unpack(ctx, ""); err != nil {
		return Result{}, fmt.Errorf("unpack %s: %w", o.Base, err)
	}
	diffIDs, err := base.RootFS(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("layers of %s: %w", o.Base, err)
	}
	parent := identity.ChainID(diffIDs).String()
	sn := c.SnapshotService("")
	id := randomID()
	active, view := "code-sandbox-mcp-build-"+id, "code-sandbox-mcp-build-view-"+id
	mounts, err := sn.Prepare(ctx, active, parent)
	if err != nil {
		return Result{}, fmt.Errorf("prepare a snapshot on %s: %w", o.Base, err)
	}
	defer cleanup(ctx, o.Log, func(ctx context.Context) error { return sn.Remove(ctx, active) })
	lower, err := sn.View(ctx, view, parent)
	if err != nil {
		return Result{}, fmt.Errorf("view %s: %w", o.Base, err)
	}
	defer cleanup(ctx, o.Log, func(ctx context.Context) error { return sn.Remove(ctx, view) })

	man := Manifest{From: o.Base, Apt: []Package{}, Pip: []Package{}, Npm: []Package{}}
	if err := withMounted(mounts, func(dir string) error { return fill(ctx, dir, o, &man) }); err != nil {
		return Result{}, err
	}

	fmt.Fprintln(o.Log, "build: computing the new layer")
	layer, err := c.DiffService().Compare(ctx, lower, mounts,
		diff.WithMediaType(ocispec.MediaTypeImageLayerGzip),
		diff.WithReference("code-sandbox-mcp-build-"+id))
	if err != nil {
		return Result{}, fmt.Errorf("diff the new layer: %w", err)
	}
	// The layer's uncompressed digest, its diff ID, is a label of its
	// content (containerd 1.6 and 2.x), or an annotation.
	uncompressed := layer.Annotations["containerd.io/uncompressed"]
	if info, err := c.ContentStore().Info(ctx, layer.Digest); err == nil && uncompressed == "" {
		uncompressed = info.Labels["containerd.io/uncompressed"]
	}
	diffID, err := digest.Parse(uncompressed)
	if err != nil {
		return Result{}, fmt.Errorf("the new layer %s has no uncompressed digest: %w", layer.Digest, err)
	}
	layer.Annotations = nil
	manJSON, err := json.Marshal(man)
	if err != nil {
		return Result{}, err
	}
	target, err := writeImage(ctx, c, base, layer, diffID, o, key, manJSON)
	if err != nil {
		return Result{}, err
	}
	rec := images.Image{Name: tag, Target: target, Labels: map[string]string{LabelBuildKey: key}}
	if _, err := c.ImageService().Create(ctx, rec); errdefs.IsAlreadyExists(err) {
		_, err = c.ImageService().Update(ctx, rec, "target", "labels")
		if err != nil {
			return Result{}, fmt.Errorf("update image %s: %w", tag, err)
		}
	} else if err != nil {
		return Result{}, fmt.Errorf("create image %s: %w", tag, err)
	}
	fmt.Fprintf(o.Log, "build: unpacking %s\n", tag)
	if err := containerd.NewImage(c, rec).Unpack(ctx, ""); err != nil {
		return Result{}, fmt.Errorf("unpack %s: %w", tag, err)
	}
	return Result{Ref: tag}, nil
}

// fill puts the packages into the tree at dir and the manifest with them:
// Debian packages first (a wheel or an npm package may need a library
// they bring), then Python's, then npm's.
func fill(ctx context.Context, dir string, o Options, man *Manifest) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if len(o.Request.Apt) != 0 {
		tmp, err := os.MkdirTemp("", "code-sandbox-mcp-apt-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		fmt.Fprintf(o.Log, "build: downloading Debian packages with this host's apt-get: %v\n", o.Request.Apt)
		debs, err := DownloadDebs(ctx, root, o.Request.Apt, o.Request.AptSources, tmp, o.Env, o.Log)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Log, "build: installing %d Debian packages with the image's dpkg, in a chroot without network\n", len(debs))
		pkgs, err := InstallDebs(ctx, dir, root, debs, o.Request.Apt, o.Log)
		if err != nil {
			return err
		}
		man.Apt = append(man.Apt, pkgs...)
	}
	if len(o.Request.Pip) != 0 {
		version, err := PythonVersion(root)
		if err != nil {
			return err
		}
		tmp, err := os.MkdirTemp("", "code-sandbox-mcp-wheels-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		fmt.Fprintf(o.Log, "build: downloading wheels for Python %s: %v\n", version, o.Request.Pip)
		if err := DownloadWheels(ctx, o.Request.Pip, version, tmp, o.Env, o.Log); err != nil {
			return err
		}
		pkgs, err := InstallWheels(root, tmp, o.Request.Pip, version, o.Log)
		if err != nil {
			return err
		}
		man.Pip = append(man.Pip, pkgs...)
	}
	if len(o.Request.Npm) != 0 {
		stage, err := os.MkdirTemp("", "code-sandbox-mcp-npm-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(stage)
		fmt.Fprintf(o.Log, "build: installing npm packages without their scripts: %v\n", o.Request.Npm)
		pkgs, scripts, err := NpmInstall(ctx, o.Request.Npm, stage, o.Env, o.Log)
		if err != nil {
			return err
		}
		if len(scripts) != 0 {
			fmt.Fprintf(o.Log, "build: warning: these packages declare install scripts, which were not run; they may not work (a native addon will not): %s\n", strings.Join(scripts, ", "))
		}
		if err := CopyTree(root, filepath.Join(stage, "node_modules"), NodeModules); err != nil {
			return fmt.Errorf("copy the npm packages into the image: %w", err)
		}
		man.Npm = append(man.Npm, pkgs...)
	}
	data, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(root, ManifestPath, append(data, '\n'), 0o644)
}

// withMounted mounts mounts on a temporary directory for f, and unmounts
// and removes it whatever f returns.
func withMounted(mounts []mount.Mount, f func(dir string) error) (err error) {
	dir, err := os.MkdirTemp("", "code-sandbox-mcp-build-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	if err := mount.All(mounts, dir); err != nil {
		return fmt.Errorf("mount the build snapshot: %w", err)
	}
	defer func() {
		if uerr := mount.UnmountAll(dir, 0); uerr != nil && err == nil {
			err = fmt.Errorf("unmount the build snapshot at %s: %w", dir, uerr)
		}
	}()
	return f(dir)
}

// writeImage writes the new config and manifest to the content store and
// returns the manifest's descriptor.
func writeImage(ctx context.Context, c *containerd.Client, base containerd.Image, layer ocispec.Descriptor, diffID digest.Digest, o Options, key string, manJSON []byte) (ocispec.Descriptor, error) {
	cs := c.ContentStore()
	mf, err := images.Manifest(ctx, cs, base.Target(), platforms.Default())
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("manifest of %s: %w", o.Base, err)
	}
	raw, err := content.ReadBlob(ctx, cs, mf.Config)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("config of %s: %w", o.Base, err)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("config of %s: %w", o.Base, err)
	}
	cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, diffID)
	now := time.Now().UTC()
	cfg.Created = &now
	cfg.History = append(cfg.History, ocispec.History{Created: &now, CreatedBy: "code-sandbox-mcp images build", Comment: string(manJSON)})
	if cfg.Config.Labels == nil {
		cfg.Config.Labels = map[string]string{}
	}
	if len(o.Request.Npm) != 0 {
		cfg.Config.Env = setEnv(cfg.Config.Env, "NODE_PATH", "/"+NodeModules)
	}
	cfg.Config.Labels[LabelBuildKey] = key
	cfg.Config.Labels[LabelPackages] = string(manJSON)
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	cfgDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(cfgJSON), Size: int64(len(cfgJSON))}

	newMf := ocispec.Manifest{
		Versioned: mf.Versioned,
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    cfgDesc,
		Layers:    append(append([]ocispec.Descriptor{}, mf.Layers...), layer),
	}
	newMf.SchemaVersion = 2
	mfJSON, err := json.Marshal(newMf)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	mfDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(mfJSON), Size: int64(len(mfJSON))}

	// The manifest's labels tell the garbage collector what it holds.
	labels := map[string]string{"containerd.io/gc.ref.content.config": cfgDesc.Digest.String()}
	for i, l := range newMf.Layers {
		labels[fmt.Sprintf("containerd.io/gc.ref.content.l.%d", i)] = l.Digest.String()
	}
	if err := content.WriteBlob(ctx, cs, "code-sandbox-mcp-build-config-"+cfgDesc.Digest.Encoded(), bytes.NewReader(cfgJSON), cfgDesc); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("write the image config: %w", err)
	}
	if err := content.WriteBlob(ctx, cs, "code-sandbox-mcp-build-manifest-"+mfDesc.Digest.Encoded(), bytes.NewReader(mfJSON), mfDesc, content.WithLabels(labels)); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("write the image manifest: %w", err)
	}
	return mfDesc, nil
}

// cleanup runs f on a detached, bounded context; NotFound is success.
func cleanup(ctx context.Context, log io.Writer, f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := f(ctx); err != nil && !errdefs.IsNotFound(err) {
		fmt.Fprintf(log, "build: cleanup: %v\n", err)
	}
}

func randomID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// setEnv sets key to value in env, a list of KEY=value.
func setEnv(env []string, key, value string) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, key+"=") })
	return append(out, key+"="+value)
}
