package imageref

import (
	"strings"
	"testing"
)

// digest is a well-formed sha256 digest.
var digest = "sha256:" + strings.Repeat("a", 64)

func TestTagged(t *testing.T) {
	for _, tc := range []struct {
		name, ref string
		want      string // in the error; "" for none
	}{
		{"localhost", "localhost/code-sandbox-mcp/python:trixie", ""},
		{"registry with port", "registry.example.test:5000/team/python:3.12-slim", ""},
		{"docker hub in full", "docker.io/library/python:3", ""},
		{"separators", "localhost/a_b__c-d.e/f:Tag_1.0-x", ""},
		{"longest tag", "localhost/x:" + strings.Repeat("t", 128), ""},
		{"longest name", "localhost/" + strings.Repeat("n", 255-len("localhost/")) + ":1", ""},

		{"path traversal", "../../etc/x", `"../../etc/x" is not valid: want [HOST[:PORT]/]PATH:TAG`},
		{"dot components", "localhost/../etc/x:1", `"localhost/../etc/x:1" is not valid`},
		{"space", "localhost/my image:1", `"localhost/my image:1" is not valid: want`},
		{"space in tag", "localhost/x:1 2", `"localhost/x:1 2" is not valid`},
		{"newline", "localhost/x:1\nINFO all good", `"localhost/x:1\nINFO all good" is not valid`},
		{"escape", "localhost/x:1\x1b[2J", `"localhost/x:1\x1b[2J" is not valid`},
		{"NUL", "localhost/x\x00:1", `"localhost/x\x00:1" is not valid`},
		{"uppercase repository", "localhost/My/Python:1", `"localhost/My/Python:1" is not valid: the repository name must be lower case`},
		{"uppercase with escape", "localhost/X\x1b]0;t\x07:1", `"localhost/X\x1b]0;t\a:1" is not valid`},
		{"empty", "", "image reference is empty; want a full reference such as localhost/NAME:TAG"},
		{"name too long", "localhost/" + strings.Repeat("n", 256) + ":1", "the repository name is longer than 255 characters"},
		{"tag too long", "localhost/x:" + strings.Repeat("t", 129), "is not valid: want"},
		{"tag only", ":1", "is not valid"},
		{"short name", "python:3", `"python:3" is a short name, and containerd keeps names as given; want a full reference, such as "localhost/python:3" or "docker.io/library/python:3"`},
		{"short path", "my/python:tab", `such as "localhost/my/python:tab"`},
		{"no tag", "localhost/x", `"localhost/x" has no tag; add one, such as "localhost/x:1"`},
		{"digest", "localhost/x@" + digest, "has a digest; a new image is named by a tag"},
		{"tag and digest", "localhost/x:1@" + digest, "has a digest"},
		{"bad digest", "localhost/x@sha256:zz", "the digest, or the name before it, is malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := Tagged(tc.ref)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Tagged(%q): %v; want no error", tc.ref, err)
			case tc.want == "" && n.String() != tc.ref:
				t.Errorf("Tagged(%q) = %q; want it unchanged", tc.ref, n.String())
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Tagged(%q): %v; want an error containing %q", tc.ref, err, tc.want)
			}
			// The error is one line, with no byte a terminal acts on.
			if err != nil && strings.ContainsFunc(err.Error(), func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Errorf("Tagged(%q): error %q holds a control character", tc.ref, err)
			}
		})
	}
}

func TestStored(t *testing.T) {
	for _, tc := range []struct {
		ref  string
		want string // in the error; "" for none
	}{
		{"localhost/x:1", ""},
		{"localhost/x@" + digest, ""},
		{"docker.io/library/python:3@" + digest, ""},
		{"localhost/x", "has no tag or digest"},
		{"python:3", "is a short name"},
		{"localhost/x:1\n", `"localhost/x:1\n" is not valid`},
		{"", "is empty"},
	} {
		_, err := Stored(tc.ref)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Stored(%q): %v; want %q", tc.ref, err, tc.want)
		}
	}
}
