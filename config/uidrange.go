package config

import (
	"fmt"
	"strconv"
	"strings"
)

// UIDRange is a range of host uids, and the gids of the same numbers,
// that a server hands out, one to each live sandbox.
type UIDRange struct {
	First, Last uint32
}

// Size is how many uids the range holds.
func (r UIDRange) Size() int { return int(r.Last-r.First) + 1 }

// Contains reports whether uid is in the range.
func (r UIDRange) Contains(uid uint32) bool { return uid >= r.First && uid <= r.Last }

// Overlaps reports whether r and o share a uid.
func (r UIDRange) Overlaps(o UIDRange) bool { return r.First <= o.Last && o.First <= r.Last }

func (r UIDRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// nobody is the host's overflow uid and gid: files and processes of
// unmapped ids show as it, and distributions run daemons as it.
const nobody = 65534

// ParseUIDRange reads "FIRST-LAST". Neither root, nor nobody (65534), nor
// the invalid id 4294967295 may be in it.
func ParseUIDRange(s string) (UIDRange, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return UIDRange{}, fmt.Errorf("%q; want FIRST-LAST, such as \"2000000000-2000065535\"", s)
	}
	first, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	last, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	r := UIDRange{First: uint32(first), Last: uint32(last)}
	switch {
	case err1 != nil || err2 != nil:
		return UIDRange{}, fmt.Errorf("%q; want two uids from 1 to 4294967294, FIRST-LAST", s)
	case first > last:
		return UIDRange{}, fmt.Errorf("%q: the first uid is above the last", s)
	case first == 0:
		return UIDRange{}, fmt.Errorf("%q holds 0: sandboxes never run as root", s)
	case r.Contains(nobody):
		return UIDRange{}, fmt.Errorf("%q holds 65534 (nobody), which the host's own processes use", s)
	case last == 1<<32-1:
		return UIDRange{}, fmt.Errorf("%q holds 4294967295, which is not a valid uid", s)
	}
	return r, nil
}

// UIDs returns the range of [limits] uid_range. It is valid once Load or
// Parse accepted the configuration.
func (c *Config) UIDs() UIDRange {
	r, _ := ParseUIDRange(c.Limits.UIDRange)
	return r
}
