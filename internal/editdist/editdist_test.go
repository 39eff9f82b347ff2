package editdist

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"python", "python", 0}, {"pyton", "python", 1}, {"pyhton", "python", 2},
		{"", "abc", 3}, {"abc", "", 3}, {"memroy", "memory", 2}, {"ruby", "python", 6},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d; want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
