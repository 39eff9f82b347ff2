package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"code-sandbox-mcp/internal/editdist"
)

// maxTypo is the edit distance within which an unknown name is taken for
// a typo of a known one, and the known one suggested.
const maxTypo = 2

// nearest returns the name in known nearest to name within maxTypo edits,
// the first in known's order of those as near; "" if none is.
func nearest(name string, known []string) string {
	best, bestD := "", maxTypo+1
	for _, k := range known {
		if d := editdist.Distance(name, k); d < bestD && k != name {
			best, bestD = k, d
		}
	}
	return best
}

// unknownKeys describes the keys of u that root (the struct decode fills)
// has no place for: each unknown table or key once (not the keys inside
// an unknown table), with the nearest known key at its place, if one is
// within maxTypo edits.
func unknownKeys(root reflect.Type, u []toml.Key) string {
	unknown := map[string]bool{}
	for _, k := range u {
		unknown[k.String()] = true
	}
	var parts []string
	for _, k := range u {
		inUnknown := false
		for i := 1; i < len(k); i++ {
			if unknown[k[:i].String()] {
				inUnknown = true
			}
		}
		if inUnknown {
			continue
		}
		s := k.String()
		if near := nearest(k[len(k)-1], keysAt(root, k[:len(k)-1])); near != "" {
			s += fmt.Sprintf(" (did you mean %s?)", append(k[:len(k)-1:len(k)-1], near))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// keysAt returns the TOML keys of the table at path in t, sorted: the
// toml tags of its struct's fields. A map's key (a language's name) is
// any name. Nil if path leads to no table.
func keysAt(t reflect.Type, path toml.Key) []string {
	for {
		switch t.Kind() {
		case reflect.Pointer:
			t = t.Elem()
			continue
		case reflect.Map:
			if len(path) == 0 {
				return nil
			}
			t, path = t.Elem(), path[1:]
			continue
		case reflect.Struct:
		default:
			return nil
		}
		if len(path) == 0 {
			var keys []string
			for i := range t.NumField() {
				if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); tag != "" && tag != "-" {
					keys = append(keys, tag)
				}
			}
			sort.Strings(keys)
			return keys
		}
		f, ok := fieldOf(t, path[0])
		if !ok {
			return nil
		}
		t, path = f.Type, path[1:]
	}
}

// fieldOf returns the field of struct t whose toml tag is key.
func fieldOf(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); tag == key {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}
