package pkgspec

import (
	"reflect"
	"testing"
)

func TestPip(t *testing.T) {
	got, err := Pip(SplitList(" Foo_Bar.baz==1.0 ,requests,requests"))
	if want := []string{"foo-bar-baz==1.0", "requests"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Pip = %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"foo>=1", "../x", "foo==", "-e x", "foo bar"} {
		if _, err := Pip([]string{bad}); err == nil {
			t.Errorf("Pip(%q) = nil error; want one", bad)
		}
	}
}

func TestNpm(t *testing.T) {
	got, err := Npm(SplitList("lodash@4.17.21,@scope/pkg,@scope/pkg@^1.2"))
	if want := []string{"@scope/pkg", "@scope/pkg@^1.2", "lodash@4.17.21"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Npm = %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"Upper", "../x", "git+https://x", "x@"} {
		if _, err := Npm([]string{bad}); err == nil {
			t.Errorf("Npm(%q) = nil error; want one", bad)
		}
	}
}

func TestApt(t *testing.T) {
	got, err := Apt([]string{"libgomp1", "g++", "libgomp1"})
	if want := []string{"g++", "libgomp1"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Apt = %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"Upper", "a", "x;y", "../x", "-oDebug=1"} {
		if _, err := Apt([]string{bad}); err == nil {
			t.Errorf("Apt(%q) = nil error; want one", bad)
		}
	}
}
