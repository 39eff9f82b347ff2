package jsontest

import (
	"encoding/json"
	"slices"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestGet(t *testing.T) {
	v := decode(t, `{"outcome": {"exit_code": 3, "files": [1]}, "principal": "alice"}`)
	tests := []struct {
		path string
		want any
	}{
		{"principal", "alice"},
		{"outcome.exit_code", 3.0},
		{"outcome.missing", nil},
		{"principal.name", nil}, // not an object on the way
		{"outcome.files.0", nil},
	}
	for _, tt := range tests {
		if got := Get(v, tt.path); got != tt.want {
			t.Errorf("Get(%q) = %v; want %v", tt.path, got, tt.want)
		}
	}
	if got, ok := Get(v, "outcome.files").([]any); !ok || len(got) != 1 {
		t.Errorf("Get(outcome.files) = %v; want [1]", Get(v, "outcome.files"))
	}
}

func TestLines(t *testing.T) {
	for _, data := range []string{"{\"a\":1}\n{\"b\":\"x\"}\n", "{\"a\":1}\n{\"b\":\"x\"}"} {
		lines, recs := Lines(t, "log", []byte(data))
		if want := []string{`{"a":1}`, `{"b":"x"}`}; !slices.Equal(lines, want) {
			t.Errorf("%q: lines %q; want %q", data, lines, want)
		}
		if len(recs) != 2 || recs[0]["a"] != 1.0 || recs[1]["b"] != "x" {
			t.Errorf("%q: records %v; want a=1, then b=x", data, recs)
		}
	}
}

func TestArraysWithoutItems(t *testing.T) {
	v := decode(t, `{"tools": [
		{"inputSchema": {"type": "object", "properties": {
			"files": {"type": "array", "items": {"type": "string"}},
			"args": {"type": "array"}}}},
		{"outputSchema": {"type": "array", "items": {"type": "array"}}}]}`)
	got := ArraysWithoutItems("tools/list", v)
	want := []string{
		"tools/list.tools[0].inputSchema.properties.args",
		"tools/list.tools[1].outputSchema.items",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q; want %q", got, want)
	}
	if got := ArraysWithoutItems("x", decode(t, `{"type": "array", "items": {"type": "number"}}`)); got != nil {
		t.Errorf("a schema whose arrays all have items: got %q; want none", got)
	}
}
