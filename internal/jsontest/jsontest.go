// Package jsontest reads JSON the way tests check it: the value at a
// dotted path of a decoded object, a file of JSON lines (a log, an audit
// trail), and the arrays of a JSON schema that do not say what they hold.
// It is for tests only, and knows nothing of what the JSON means.
package jsontest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Get returns the value at path, names joined by dots
// ("outcome.exit_code"), in v, as encoding/json decodes into an any; nil
// if any name on the way is missing or not an object.
func Get(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// Lines decodes data, one JSON object a line (the last newline optional),
// and returns its lines, without their newlines, and the objects, in
// order. A line that is not an object fails t, naming the line and name,
// where data came from.
func Lines(t testing.TB, name string, data []byte) ([]string, []map[string]any) {
	t.Helper()
	var lines []string
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s: %q: %v", name, l, err)
		}
		lines, recs = append(lines, l), append(recs, r)
	}
	return lines, recs
}

// ArraysWithoutItems returns, sorted, the path from root of every object
// in v, a decoded JSON value, that says "type": "array" but has no
// "items": a schema some clients refuse, since it does not say what the
// array holds.
func ArraysWithoutItems(root string, v any) []string {
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["type"] == "array" && v["items"] == nil {
				out = append(out, path)
			}
			for k, e := range v {
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk(root, v)
	slices.Sort(out)
	return out
}
