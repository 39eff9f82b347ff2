// Package imagebuild builds a derived sandbox image: a base image in
// containerd plus Debian packages, Python wheels and npm packages the
// host downloaded, put into a containerd snapshot of the base, committed
// as one new layer and stored under a tag. Wheels and npm packages are
// put in by this package's own code: none of their code runs, on the
// host or in the image. Debian packages are installed by the image's own
// dpkg in a chroot of the snapshot without network, so their maintainer
// scripts run as root there, as they do when mmdebstrap builds the
// default images, and never on the host (see apt.go). It must not know
// the server, the MCP layer or the configuration file: the caller names
// the base image.
package imagebuild

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
)

// formatVersion is part of every cache key: a change to what a build puts
// into an image changes it, so that older builds are not taken as current.
const formatVersion = "1"

// Label keys, under the project's prefix.
const (
	// LabelBuildKey holds a build's cache key, on the image record and
	// in the image config.
	LabelBuildKey = "org.code-sandbox-mcp.build-key"
	// LabelPackages holds the manifest of packages.json in the image config.
	LabelPackages = "org.code-sandbox-mcp.packages"
)

// ManifestPath is where a built image lists what was added to it.
const ManifestPath = "etc/code-sandbox-mcp/packages.json"

// Request is what to add to a base image.
type Request struct {
	// Pip are Python requirements, NAME or NAME==VERSION, normalised.
	Pip []string
	// Npm are npm packages, NAME or NAME@VERSION.
	Npm []string
	// Apt are Debian package names.
	Apt []string
	// AptSources, if any, are the sources.list lines apt downloads Apt
	// from, instead of the base image's own sources.
	AptSources []string
}

// Key is the cache key of building req on the base whose manifest has
// digest base: a change to either, or to this package's format, changes it.
func Key(base string, req Request) string {
	h := sha256.New()
	fmt.Fprintf(h, "format %s\nbase %s\n", formatVersion, base)
	for _, part := range []struct {
		kind  string
		specs []string
	}{{"pip", req.Pip}, {"npm", req.Npm}, {"apt", req.Apt}, {"apt-source", req.AptSources}} {
		specs := slices.Clone(part.specs)
		slices.Sort(specs)
		for _, s := range slices.Compact(specs) {
			fmt.Fprintf(h, "%s %s\n", part.kind, s)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
