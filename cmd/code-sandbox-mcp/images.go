package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	containerd "github.com/containerd/containerd/v2/client"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/containers/imagebuild"
	"code-sandbox-mcp/containers/imageref"
	"code-sandbox-mcp/containers/images"
	"code-sandbox-mcp/containers/ociarchive"
	"code-sandbox-mcp/containers/pkgspec"
)

const imagesUsage = `usage:
  images import [--unpack] FILE...
                          import OCI image archives into containerd; prints each image's name
                          (--unpack: unpack each into the daemon's default snapshotter too, so
                          that no first run waits for it)
  images list             list containerd's images: name, digest, size, unpacked
  images pack --rootfs ROOTFS.tar --ref REF [--env K=V]... [--workdir DIR] [--user U] [--cmd ARG]... --out OUT.tar
                          pack a root file system tar into an OCI image archive (needs no containerd)
  images build --from python|javascript|REF [--apt PKG,...] [--apt-source LINE]... [--pip PKG[==V],...] [--npm PKG[@V],...] [--tag REF]
                          build an image of the base with more packages, as root, and store it in
                          containerd; prints its name (progress goes to stderr). --from names a
                          language (its configured image) or any image in containerd. Debian
                          packages are downloaded by this host's apt-get from the image's own apt
                          sources (or the --apt-source lines, such as
                          "deb [trusted=yes] http://127.0.0.1:8080/ ./", instead) and installed by
                          the image's dpkg in a chroot without network: their maintainer scripts run
                          as root there, never on this host. Wheels come from this host's pip and
                          its index (PIP_INDEX_URL, pip.conf) and are unpacked by this program; npm
                          packages from this host's npm and its registry, installed with
                          --ignore-scripts into /usr/local/lib/node_modules (NODE_PATH): no pip or
                          npm package code runs. --tag defaults to
                          localhost/code-sandbox-mcp/NAME-custom:KEY, KEY a hash of base and
                          packages; a second build of the same is a no-op. A REF (--tag, --from,
                          pack's --ref) is a full reference, [HOST[:PORT]/]PATH:TAG such as
                          localhost/my/python:1: PATH lower case, no spaces or control
                          characters, no short name (python:3), a tag required (--from may
                          give a digest instead); anything else is refused with exit status 2
                          before any work.
  images build --configured
                          build the image of each enabled language that has a [languages.NAME]
                          packages table, on its image, as the server runs it
                          (localhost/code-sandbox-mcp/NAME-packages:HASH); prints their names. A
                          no-op for those built already from the same base and lists, and without
                          any packages table. make setup runs it.
`

// images runs an images verb; it parses its own verbs and flags, and the
// global flags come before it. Bad flags and arguments, an invalid image
// reference among them, exit with exitUsage, before any work is done.
func (iv *invocation) images(ctx context.Context, args []string) int {
	cfg, err := loadConfig(*iv.g, iv.env)
	if err != nil {
		fmt.Fprintf(iv.stderr, "code-sandbox-mcp: %v\n", err)
		return exitUsage
	}
	if len(args) > 0 && args[0] == "build" {
		err = imagesBuild(ctx, cfg, args[1:], os.Environ(), iv.stdout, iv.stderr)
		if err != nil {
			err = fmt.Errorf("images build: %w", err)
		}
	} else {
		err = imagesCommand(ctx, cfg.Containerd.Address, cfg.Containerd.Namespace, args, iv.stdout, iv.stderr)
	}
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	fmt.Fprintf(iv.stderr, "code-sandbox-mcp: %v\n", err)
	if errors.As(err, new(usageError)) {
		return exitUsage
	}
	return exitFailure
}

// usageError is a bad flag or argument of an images verb, found before
// the verb did anything.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// checkRef checks the image reference value of flag name with check (an
// imageref function).
func checkRef[T any](name, value string, check func(string) (T, error)) error {
	if _, err := check(value); err != nil {
		return fmt.Errorf("--%s: %w", name, err)
	}
	return nil
}

// imagesCommand runs the images verbs: import and list talk to containerd
// at address in namespace; pack works offline. Results go to stdout,
// usage and flag errors to stderr.
func imagesCommand(ctx context.Context, address, namespace string, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, imagesUsage)
		return usageError{errors.New("images: missing verb; want import, list, pack or build")}
	}
	verb, args := args[0], args[1:]
	var err error
	switch verb {
	case "import":
		err = imagesImport(ctx, address, namespace, args, stdout, stderr)
	case "list":
		err = imagesList(ctx, address, namespace, args, stdout, stderr)
	case "pack":
		err = imagesPack(args, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, imagesUsage)
		return nil
	default:
		fmt.Fprint(stderr, imagesUsage)
		return usageError{fmt.Errorf("images: unknown verb %q; want import, list, pack or build", verb)}
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("images %s: %w", verb, err)
	}
	return nil
}

// parseFlags parses args into fs; a bad flag is a usage error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return usageError{err}
	}
	return err
}

func newFlagSet(verb string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("images "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, imagesUsage) }
	return fs
}

func imagesImport(ctx context.Context, address, namespace string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("import", stderr)
	unpack := fs.Bool("unpack", false, "unpack each image into the default snapshotter too")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return usageError{errors.New("no archive given; name one or more OCI image archives")}
	}
	c, err := images.Dial(ctx, address, namespace)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, name := range fs.Args() {
		if err := importFile(ctx, c, name, *unpack, stdout); err != nil {
			return err
		}
	}
	return nil
}

// importFile imports the archive name and, if unpack, unpacks its images
// into the daemon's default snapshotter.
func importFile(ctx context.Context, c *containerd.Client, name string, unpack bool, stdout io.Writer) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	refs, err := images.Import(ctx, c, f)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, ref := range refs {
		if unpack {
			img, err := c.GetImage(ctx, ref)
			if err == nil {
				err = img.Unpack(ctx, "")
			}
			if err != nil {
				return fmt.Errorf("%s: unpack %s: %w", name, ref, err)
			}
		}
		fmt.Fprintln(stdout, ref)
	}
	return nil
}

func imagesList(ctx context.Context, address, namespace string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("list", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	c, err := images.Dial(ctx, address, namespace)
	if err != nil {
		return err
	}
	defer c.Close()
	infos, err := images.List(ctx, c)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDIGEST\tSIZE\tUNPACKED")
	for _, in := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\n", in.Name, in.Digest, humanSize(in.Size), in.Unpacked)
	}
	return tw.Flush()
}

func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if f < unit {
			break
		}
		f, suffix = f/unit, s
	}
	return fmt.Sprintf("%.1f %s", f, suffix)
}

// repeated is a flag that may be given more than once.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, " ") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func imagesPack(args []string, stderr io.Writer) error {
	fs := newFlagSet("pack", stderr)
	var (
		img      ociarchive.Image
		env, cmd repeated
		rootfs   = fs.String("rootfs", "", "root file system, an uncompressed tar `file`")
		out      = fs.String("out", "", "OCI image archive `file` to write")
	)
	fs.StringVar(&img.Ref, "ref", "", "full image reference with a tag, such as localhost/code-sandbox-mcp/python:trixie")
	fs.StringVar(&img.WorkingDir, "workdir", "", "default working `directory`")
	fs.StringVar(&img.User, "user", "", "default `user`, such as 65534:65534")
	fs.Var(&env, "env", "default environment `K=V`; repeat for more")
	fs.Var(&cmd, "cmd", "default command, one `arg` per flag; repeat for more")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 0:
		fs.Usage()
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	case *rootfs == "" || *out == "" || img.Ref == "":
		fs.Usage()
		return usageError{errors.New("--rootfs, --ref and --out are required")}
	}
	if err := checkRef("ref", img.Ref, imageref.Tagged); err != nil {
		return usageError{err}
	}
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return usageError{fmt.Errorf("--env %q: want KEY=value", kv)}
		}
	}
	img.Env, img.Cmd = env, cmd

	in, err := os.Open(*rootfs)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeAtomic(*out, func(w io.Writer) error { return ociarchive.Pack(w, in, img) })
}

// writeAtomic writes name through write, so that name is either the whole
// of what write wrote or left as it was.
func writeAtomic(name string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}

// buildFlags are images build's flags, parsed.
type buildFlags struct {
	from, tag string
	req       imagebuild.Request
	// configured builds the configuration's packages tables instead.
	configured bool
}

// parseBuild parses images build's flags. A --tag given must be a full
// reference with a tag (imageref.Tagged); one not given is the build's
// default. Its errors are all usage errors.
func parseBuild(args []string, stderr io.Writer) (buildFlags, error) {
	b, err := parseBuildFlags(args, stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		err = usageError{err}
	}
	return b, err
}

// parseBuildFlags is parseBuild, its errors left as they are.
func parseBuildFlags(args []string, stderr io.Writer) (buildFlags, error) {
	fs := newFlagSet("build", stderr)
	var b buildFlags
	fs.StringVar(&b.from, "from", "", "base: python, javascript or an image `REF` in containerd")
	fs.StringVar(&b.tag, "tag", "", "the new image's `REF`")
	pip := fs.String("pip", "", "Python packages, `PKG[==V],...`")
	npm := fs.String("npm", "", "npm packages, `PKG[@V],...`")
	apt := fs.String("apt", "", "Debian packages, `PKG,...`")
	var sources repeated
	fs.Var(&sources, "apt-source", "a sources.list `LINE` to download Debian packages from instead of the image's sources; repeat for more")
	fs.BoolVar(&b.configured, "configured", false, "build the image of each language with a packages table instead")
	if err := fs.Parse(args); err != nil {
		return b, err
	}
	var err error
	switch {
	case fs.NArg() != 0:
		fs.Usage()
		return b, fmt.Errorf("unexpected arguments %q", fs.Args())
	case b.configured && (b.from != "" || b.tag != "" || *pip != "" || *npm != "" || *apt != "" || len(sources) != 0):
		return b, errors.New("--configured builds what the configuration's packages tables list; give it alone, or give --from and packages instead")
	case b.configured:
		return b, nil
	case b.from == "":
		fs.Usage()
		return b, errors.New("--from is required: python, javascript or an image in containerd")
	}
	tagged := false
	fs.Visit(func(f *flag.Flag) { tagged = tagged || f.Name == "tag" })
	if tagged {
		if err := checkRef("tag", b.tag, imageref.Tagged); err != nil {
			return b, err
		}
	}
	if b.req.Pip, err = pkgspec.Pip(pkgspec.SplitList(*pip)); err != nil {
		return b, fmt.Errorf("--pip: %w", err)
	}
	if b.req.Npm, err = pkgspec.Npm(pkgspec.SplitList(*npm)); err != nil {
		return b, fmt.Errorf("--npm: %w", err)
	}
	if b.req.Apt, err = pkgspec.Apt(pkgspec.SplitList(*apt)); err != nil {
		return b, fmt.Errorf("--apt: %w", err)
	}
	for _, line := range sources {
		s, err := imagebuild.ParseAptSource(line)
		if err != nil {
			return b, err
		}
		b.req.AptSources = append(b.req.AptSources, s)
	}
	switch {
	case len(b.req.AptSources) != 0 && len(b.req.Apt) == 0:
		return b, errors.New("--apt-source without --apt: name the Debian packages to add with --apt")
	case len(b.req.Apt) == 0 && len(b.req.Pip) == 0 && len(b.req.Npm) == 0:
		return b, errors.New("nothing to add; name packages with --apt, --pip or --npm")
	}
	return b, nil
}

// baseRef is the image --from names: a language's configured image, or
// the reference itself, which must be a full reference with a tag or a
// digest (imageref.Stored).
func baseRef(cfg *config.Config, from string) (string, error) {
	if l, ok := cfg.Languages[from]; ok {
		return l.Image, nil
	}
	if err := checkRef("from", from, imageref.Stored); err != nil {
		return "", usageError{err}
	}
	return from, nil
}

// imagesBuild builds an image with more packages and prints its name.
func imagesBuild(ctx context.Context, cfg *config.Config, args, env []string, stdout, stderr io.Writer) error {
	b, err := parseBuild(args, stderr)
	if err != nil {
		return err
	}
	var builds []imagebuild.Options
	if b.configured {
		builds = configuredBuilds(cfg)
		if len(builds) == 0 {
			fmt.Fprintln(stderr, "images build: no enabled language has a packages table; nothing to build")
			return nil
		}
	} else {
		base, err := baseRef(cfg, b.from)
		if err != nil {
			return err
		}
		builds = []imagebuild.Options{{Base: base, Tag: b.tag, Request: b.req}}
	}
	if os.Geteuid() != 0 {
		return errors.New("it mounts containerd snapshots; run it as root")
	}
	c, err := images.Dial(ctx, cfg.Containerd.Address, cfg.Containerd.Namespace)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, o := range builds {
		o.Env, o.Log = env, stderr
		res, err := imagebuild.Build(ctx, c, o)
		if err != nil {
			if b.configured {
				return fmt.Errorf("the packages of %s: %w", o.Tag, err)
			}
			return err
		}
		fmt.Fprintln(stdout, res.Ref)
	}
	return nil
}

// configuredBuilds are the builds of cfg's enabled languages that have a
// packages table: each on the table's image, under the name the server
// runs the language in.
func configuredBuilds(cfg *config.Config) []imagebuild.Options {
	var out []imagebuild.Options
	for _, l := range cfg.Enabled() {
		if l.Packages.Empty() {
			continue
		}
		out = append(out, imagebuild.Options{
			Base: l.BaseImage, Tag: l.Image,
			Request: imagebuild.Request{Apt: l.Packages.Apt, Pip: l.Packages.Pip, Npm: l.Packages.Npm},
		})
	}
	return out
}
