package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"code-sandbox-mcp/containers/pkgspec"
)

// Packages is a [languages.NAME] packages table: what is added to the
// language's image key. `code-sandbox-mcp images build
// --configured` (which `make setup` runs) builds it; the server then runs
// the language in the built image, never in the base.
type Packages struct {
	// Apt are Debian package names.
	Apt []string `toml:"apt"`
	// Pip are Python requirements, NAME or NAME==VERSION.
	Pip []string `toml:"pip"`
	// Npm are npm packages, NAME or NAME@VERSION.
	Npm []string `toml:"npm"`
}

// Empty reports whether p adds nothing.
func (p Packages) Empty() bool { return len(p.Apt)+len(p.Pip)+len(p.Npm) == 0 }

// normalized returns p checked, sorted and without repeats, as pkgspec
// has them; the error names the list at key.
func (p Packages) normalized(key string) (Packages, error) {
	var out Packages
	var err error
	if out.Apt, err = pkgspec.Apt(p.Apt); err != nil {
		return Packages{}, fmt.Errorf("%s.apt: %w", key, err)
	}
	if out.Pip, err = pkgspec.Pip(p.Pip); err != nil {
		return Packages{}, fmt.Errorf("%s.pip: %w", key, err)
	}
	if out.Npm, err = pkgspec.Npm(p.Npm); err != nil {
		return Packages{}, fmt.Errorf("%s.npm: %w", key, err)
	}
	return out, nil
}

// clone returns p with lists of its own, so that decoding a file into it
// does not write into the defaults' arrays.
func (p Packages) clone() Packages {
	return Packages{Apt: slices.Clone(p.Apt), Pip: slices.Clone(p.Pip), Npm: slices.Clone(p.Npm)}
}

// PackagesImage is the reference of the image that language name's
// packages p build on base: localhost/code-sandbox-mcp/NAME-packages:H,
// H a hash of base and p. It depends on the configuration alone, so the
// server knows it without asking anyone; the build labels the image with
// the base's digest too, and builds again when the base changed.
func PackagesImage(name, base string, p Packages) string {
	h := sha256.New()
	fmt.Fprintf(h, "base %s\n", base)
	for _, part := range []struct {
		kind  string
		specs []string
	}{{"apt", p.Apt}, {"pip", p.Pip}, {"npm", p.Npm}} {
		for _, s := range part.specs {
			fmt.Fprintf(h, "%s %s\n", part.kind, s)
		}
	}
	return "localhost/code-sandbox-mcp/" + name + "-packages:" + hex.EncodeToString(h.Sum(nil))[:16]
}
