// Package pkgspec checks and normalises the package names a derived image
// is built with: Python requirements, npm packages and Debian packages, as
// `images build` takes them on its command line and a [languages.NAME]
// packages table lists them. It uses the standard library alone, so that
// the configuration can check a table with the same rules as the command.
package pkgspec

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

var (
	pipNameRe = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	pipVerRe  = regexp.MustCompile(`^[A-Za-z0-9.+!_-]+$`)
	pipSepRe  = regexp.MustCompile(`[-_.]+`)
	npmNameRe = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$`)
	npmVerRe  = regexp.MustCompile(`^[A-Za-z0-9.+_^~<>=*| -]+$`)
	aptNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
)

// NormalizePipName is PEP 503's normal form of a distribution name.
func NormalizePipName(name string) string {
	return pipSepRe.ReplaceAllString(strings.ToLower(name), "-")
}

// Pip checks Python requirements, each NAME or NAME==VERSION, and returns
// them normalised, sorted and without repeats. Other version operators
// are refused: a build pins.
func Pip(specs []string) ([]string, error) {
	var out []string
	for _, s := range trimmed(specs) {
		name, ver, pinned := strings.Cut(s, "==")
		if !pipNameRe.MatchString(name) || pinned && !pipVerRe.MatchString(ver) {
			return nil, fmt.Errorf("pip package %q: want NAME or NAME==VERSION, such as requests or requests==2.32.3", s)
		}
		spec := NormalizePipName(name)
		if pinned {
			spec += "==" + ver
		}
		out = append(out, spec)
	}
	return uniqSorted(out), nil
}

// Npm checks npm packages, each NAME or NAME@VERSION (NAME may be
// @scope/name), and returns them sorted and without repeats.
func Npm(specs []string) ([]string, error) {
	var out []string
	for _, s := range trimmed(specs) {
		name, ver, versioned := s, "", false
		if i := strings.LastIndex(s, "@"); i > 0 {
			name, ver, versioned = s[:i], s[i+1:], true
		}
		if !npmNameRe.MatchString(name) || versioned && !npmVerRe.MatchString(ver) {
			return nil, fmt.Errorf("npm package %q: want NAME or NAME@VERSION, such as lodash or lodash@4.17.21", s)
		}
		out = append(out, s)
	}
	return uniqSorted(out), nil
}

// Apt checks Debian package names and returns them sorted and without
// repeats.
func Apt(specs []string) ([]string, error) {
	var out []string
	for _, s := range trimmed(specs) {
		if !aptNameRe.MatchString(s) {
			return nil, fmt.Errorf("apt package %q: want a Debian package name, such as libgomp1", s)
		}
		out = append(out, s)
	}
	return uniqSorted(out), nil
}

// SplitList splits a comma-separated list, as a command-line flag gives
// one, dropping blanks.
func SplitList(list string) []string {
	return trimmed(strings.Split(list, ","))
}

func trimmed(specs []string) []string {
	var out []string
	for _, s := range specs {
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
