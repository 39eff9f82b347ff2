// Package imagebuild builds a derived sandbox image: a base image in
// containerd plus Python wheels and npm packages the host downloaded, put
// into a containerd snapshot of the base by this package's own code (no
// package's code runs, on the host or in the image), committed as one new
// layer and stored under a tag. It must not know the server, the MCP
// layer or the configuration file: the caller names the base image.
package imagebuild

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
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
	// Apt are Debian packages; see the command for where they are built.
	Apt []string
}

var (
	pipNameRe = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	pipVerRe  = regexp.MustCompile(`^[A-Za-z0-9.+!_-]+$`)
	npmNameRe = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$`)
	npmVerRe  = regexp.MustCompile(`^[A-Za-z0-9.+_^~<>=*| -]+$`)
	aptNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
)

// NormalizePipName is PEP 503's normal form of a distribution name.
func NormalizePipName(name string) string {
	return regexp.MustCompile(`[-_.]+`).ReplaceAllString(strings.ToLower(name), "-")
}

// ParsePip turns a comma-separated list of NAME or NAME==VERSION into
// normalised specs. Other version operators are refused: a build pins.
func ParsePip(list string) ([]string, error) {
	var out []string
	for _, s := range splitList(list) {
		name, ver, pinned := strings.Cut(s, "==")
		if !pipNameRe.MatchString(name) || pinned && !pipVerRe.MatchString(ver) {
			return nil, fmt.Errorf("--pip %q: want NAME or NAME==VERSION, such as requests or requests==2.32.3", s)
		}
		spec := NormalizePipName(name)
		if pinned {
			spec += "==" + ver
		}
		out = append(out, spec)
	}
	return uniqSorted(out), nil
}

// ParseNpm turns a comma-separated list of NAME or NAME@VERSION (NAME may
// be @scope/name) into specs.
func ParseNpm(list string) ([]string, error) {
	var out []string
	for _, s := range splitList(list) {
		name, ver, versioned := s, "", false
		if i := strings.LastIndex(s, "@"); i > 0 {
			name, ver, versioned = s[:i], s[i+1:], true
		}
		if !npmNameRe.MatchString(name) || versioned && !npmVerRe.MatchString(ver) {
			return nil, fmt.Errorf("--npm %q: want NAME or NAME@VERSION, such as lodash or lodash@4.17.21", s)
		}
		out = append(out, s)
	}
	return uniqSorted(out), nil
}

// ParseApt turns a comma-separated list of Debian package names into specs.
func ParseApt(list string) ([]string, error) {
	var out []string
	for _, s := range splitList(list) {
		if !aptNameRe.MatchString(s) {
			return nil, fmt.Errorf("--apt %q: want a Debian package name, such as libgomp1", s)
		}
		out = append(out, s)
	}
	return uniqSorted(out), nil
}

func splitList(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func uniqSorted(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// Key is the cache key of building req on the base whose manifest has
// digest base: a change to either, or to this package's format, changes it.
func Key(base string, req Request) string {
	h := sha256.New()
	fmt.Fprintf(h, "format %s\nbase %s\n", formatVersion, base)
	for _, part := range []struct {
		kind  string
		specs []string
	}{{"pip", req.Pip}, {"npm", req.Npm}, {"apt", req.Apt}} {
		for _, s := range uniqSorted(slices.Clone(part.specs)) {
			fmt.Fprintf(h, "%s %s\n", part.kind, s)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
