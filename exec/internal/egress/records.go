package egress

import (
	"strings"
	"sync"
)

// Tally sums the connections of one host and verdict that a Records did
// not keep one by one: allowed, or not, and, apart from the rest, each of
// the proxy's limits that refused or ended them (Record.Limit).
type Tally struct {
	// Host is as a Record has it; OtherHosts for the hosts past the
	// Records' bound on tallies.
	Host        string `json:"host"`
	Allowed     bool   `json:"allowed"`
	Connections int64  `json:"connections"`
	BytesUp     int64  `json:"bytes_up"`
	BytesDown   int64  `json:"bytes_down"`
	// Reason is the limit's, or the first refused connection's, or the
	// first one's that ended early; "" if none did.
	Reason string `json:"reason,omitempty"`
}

// OtherHosts is the Host of the one tally that sums the hosts a Records
// had no room left to tally apart.
const OtherHosts = "(other hosts)"

// The lengths a kept record's fields are cut to: a name has at most 253
// bytes, and a method or a reason is short unless a program makes it
// long (a request's head may have 64 KiB).
const (
	maxHostLen   = 253
	maxMethodLen = 16
	maxReasonLen = 256
)

// Records keeps what a Proxy tells of the connections of one run within
// bounds, whatever the run does: the first Keep in full, each of its
// fields cut to a bounded length, and the rest as tallies per host and
// verdict (see Tally), at most Keep of them, past which every other host
// is summed by verdict alone (OtherHosts): a handful more, one per limit
// at most. It holds about 2×Keep×1 KiB at most.
type Records struct {
	Keep int // a zero Keep keeps none in full, and tallies every host as OtherHosts

	mu      sync.Mutex
	full    []Record
	tallies []Tally
	index   map[tallyKey]int
	limits  map[string]bool // the Reasons of the Limit records added
}

type tallyKey struct {
	host    string
	allowed bool
	limit   string // the Reason of a Record.Limit; "" for the others
}

// Add keeps r, or adds it to its tally; first reports whether r is the
// first of this run with its Reason where it is a Limit's.
func (rs *Records) Add(r Record) (first bool) {
	r.Host = cut(r.Host, maxHostLen)
	r.Method = cut(r.Method, maxMethodLen)
	r.Reason = cut(r.Reason, maxReasonLen)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r.Limit {
		if rs.limits == nil {
			rs.limits = map[string]bool{}
		}
		first = !rs.limits[r.Reason]
		rs.limits[r.Reason] = true
	}
	if len(rs.full) < rs.Keep {
		rs.full = append(rs.full, r)
		return first
	}
	if rs.index == nil {
		rs.index = map[tallyKey]int{}
	}
	k := tallyKey{host: r.Host, allowed: r.Allowed}
	if r.Limit {
		k.limit = r.Reason
	}
	i, ok := rs.index[k]
	if !ok && len(rs.tallies) >= rs.Keep {
		k.host = OtherHosts
		i, ok = rs.index[k]
	}
	if !ok {
		i = len(rs.tallies)
		rs.index[k] = i
		rs.tallies = append(rs.tallies, Tally{Host: k.host, Allowed: k.allowed})
	}
	t := &rs.tallies[i]
	t.Connections++
	t.BytesUp += r.BytesUp
	t.BytesDown += r.BytesDown
	if t.Reason == "" {
		t.Reason = r.Reason
	}
	return first
}

// Take returns what was kept since the last Take, and starts afresh:
// the records in the order they were added, and the tallies in the order
// their first connection was added; both nil if none was.
func (rs *Records) Take() ([]Record, []Tally) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	full, tallies := rs.full, rs.tallies
	rs.full, rs.tallies, rs.index, rs.limits = nil, nil, nil, nil
	return full, tallies
}

// cut returns s if it has at most n bytes, else its first bytes up to n
// in all, the last three an ellipsis; bytes that are not UTF-8 (a
// character cut in two among them) are dropped from a cut string.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-len("…")], "") + "…"
}
