package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Size is a number of bytes, written in TOML as a string with a unit
// ("512MiB", "64KiB", "1GB") or as a plain integer of bytes.
type Size int64

var sizeUnits = []struct {
	suffix string
	factor int64
}{
	// Longest suffixes first, so "MiB" is not read as "B".
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"TB", 1000 * 1000 * 1000 * 1000},
	{"B", 1},
}

// parseSize reads a size such as "512MiB", "64 KiB", "1GB" or "4096".
// Binary units (KiB, MiB, GiB, TiB) are powers of 1024, decimal ones (KB,
// MB, GB, TB) powers of 1000; a bare number is bytes.
func parseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	factor := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t = strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			factor = u.factor
			break
		}
	}
	if t == "" {
		return 0, fmt.Errorf("invalid size %q: want a number with a unit, such as \"512MiB\"", s)
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("invalid size %q: negative", s)
		}
		if n > math.MaxInt64/factor {
			return 0, fmt.Errorf("invalid size %q: too large", s)
		}
		return Size(n * factor), nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("invalid size %q: want a number with a unit (B, KiB, MiB, GiB, KB, MB, GB), such as \"512MiB\"", s)
	}
	if f < 0 {
		return 0, fmt.Errorf("invalid size %q: negative", s)
	}
	v := f * float64(factor)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return Size(v), nil
}

// String writes the size with the largest binary unit that divides it
// exactly, such as "512MiB"; parseSize reads it back.
func (s Size) String() string {
	n := int64(s)
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.factor == 0 {
			return strconv.FormatInt(n/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// UnmarshalTOML reads a size from a TOML string or integer.
func (s *Size) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		n, err := parseSize(v)
		if err != nil {
			return err
		}
		*s = n
		return nil
	case int64:
		if v < 0 {
			return fmt.Errorf("invalid size %d: negative", v)
		}
		*s = Size(v)
		return nil
	default:
		return fmt.Errorf("invalid size %v: want a string such as \"512MiB\"", v)
	}
}

// MarshalText writes the size as String does.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Duration is a time.Duration written in TOML as a string such as "30s" or
// "2m".
type Duration time.Duration

// UnmarshalTOML reads a duration from a TOML string.
func (d *Duration) UnmarshalTOML(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("invalid duration %v: want a string such as \"30s\"", v)
	}
	p, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a number with a unit, such as \"30s\" or \"2m\"", s)
	}
	*d = Duration(p)
	return nil
}

// String writes the duration as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes the duration as String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }
