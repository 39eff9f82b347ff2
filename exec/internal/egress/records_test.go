package egress

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// The first Keep records are kept whole, but for their fields' lengths;
// the rest are tallied per host and verdict, a limit's refusals apart
// from the others, for at most Keep hosts, and the others' by verdict
// alone; Take hands them out once.
func TestRecordsBounded(t *testing.T) {
	rs := &Records{Keep: 2}
	long := strings.Repeat("h", 70000)
	rs.Add(Record{Host: long, Method: strings.Repeat("M", 100), Reason: strings.Repeat("é", 40000), BytesUp: 1})
	rs.Add(Record{Host: "a", Allowed: true, BytesUp: 2})
	rs.Add(Record{Host: "a", Allowed: true, BytesUp: 3, BytesDown: 30})
	rs.Add(Record{Host: "a", Reason: "first", BytesUp: 4})
	rs.Add(Record{Host: "a", Reason: "second", BytesUp: 5})
	rs.Add(Record{Host: "a", Allowed: true, BytesDown: 6})
	rs.Add(Record{Host: "b", Reason: "b's"})
	rs.Add(Record{Host: "c", Reason: "c's"})
	for i, host := range []string{"a", "d", "e"} {
		if first := rs.Add(Record{Host: host, Reason: "over the rate", Limit: true}); first != (i == 0) {
			t.Errorf("limit record %d: first %v; want %v", i+1, first, i == 0)
		}
	}
	full, tallies := rs.Take()
	if len(full) != 2 {
		t.Fatalf("kept %d records whole; want 2", len(full))
	}
	for _, f := range []struct {
		name string
		v    string
		max  int
	}{{"host", full[0].Host, maxHostLen}, {"method", full[0].Method, maxMethodLen}, {"reason", full[0].Reason, maxReasonLen}} {
		if len(f.v) > f.max || !strings.HasSuffix(f.v, "…") || !utf8.ValidString(f.v) {
			t.Errorf("%s: %d bytes %q; want at most %d, valid UTF-8, ending in an ellipsis", f.name, len(f.v), f.v[max(0, len(f.v)-12):], f.max)
		}
	}
	want := []Tally{
		{Host: "a", Allowed: true, Connections: 2, BytesUp: 3, BytesDown: 36},
		{Host: "a", Connections: 2, BytesUp: 9, Reason: "first"},
		{Host: OtherHosts, Connections: 2, Reason: "b's"},
		{Host: OtherHosts, Connections: 3, Reason: "over the rate"},
	}
	if !reflect.DeepEqual(tallies, want) {
		t.Errorf("tallies\n%+v; want\n%+v", tallies, want)
	}
	if full, tallies := rs.Take(); full != nil || tallies != nil {
		t.Errorf("a second Take gave %v %v; want nothing", full, tallies)
	}
	rs.Add(Record{Host: "d"})
	if full, tallies := rs.Take(); len(full) != 1 || full[0].Host != "d" || tallies != nil {
		t.Errorf("after a Take, a record is kept whole again: got %v %v", full, tallies)
	}
}

// A flood of connections, each to a host of its own with a long name and
// reason, leaves at most Keep records and Keep+1 tallies, each of bounded
// size, that count every connection.
func TestRecordsFloodIsBounded(t *testing.T) {
	rs := &Records{Keep: 100}
	for i := range 200000 {
		rs.Add(Record{Host: strconv.Itoa(i) + strings.Repeat("x", 300), Reason: strings.Repeat("r", 1000)})
	}
	full, tallies := rs.Take()
	if len(full) != 100 || len(tallies) != 101 || tallies[100].Host != OtherHosts {
		t.Fatalf("%d records, %d tallies; want 100, and 101 tallies, the last of the other hosts", len(full), len(tallies))
	}
	var n int64
	for _, tl := range tallies {
		n += tl.Connections
		if len(tl.Host) > maxHostLen || len(tl.Reason) > maxReasonLen {
			t.Errorf("tally %q: host %d bytes, reason %d", tl.Host[:20], len(tl.Host), len(tl.Reason))
		}
	}
	if n != 200000-100 {
		t.Errorf("tallies count %d connections; want %d", n, 200000-100)
	}
}
