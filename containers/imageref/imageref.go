// Package imageref checks the image references a person gives the command
// line: the name images build stores its image under, the one images pack
// writes into an archive, the base images build starts from.
//
// A reference is accepted only in the full form containerd stores it
// under, such as localhost/my/python:1 or docker.io/library/python:3.12:
// containerd keeps a name as it is given, so the short python:3 that
// Docker would expand to docker.io/library/python:3 would be stored, or
// looked up, under a name no other tool uses. A name without a tag is
// refused too, not given :latest: the tag is what says which build a
// server runs, and a name nobody typed is not a good default for it.
//
// Its errors quote the value with %q, so that a reference holding a
// newline or a terminal escape is never printed raw. It knows the
// reference grammar (github.com/distribution/reference), not containerd.
package imageref

import (
	"errors"
	"fmt"
	"strings"

	"github.com/distribution/reference"
)

// Example is the form the errors ask for.
const Example = "localhost/NAME:TAG"

// Tagged returns ref parsed if it is a full reference with a tag and no
// digest: a name to store a new image under.
func Tagged(ref string) (reference.NamedTagged, error) {
	n, err := parse(ref)
	if err != nil {
		return nil, err
	}
	if _, ok := n.(reference.Digested); ok {
		return nil, fmt.Errorf("image reference %q has a digest; a new image is named by a tag: want a full reference such as %s", ref, Example)
	}
	t, ok := n.(reference.NamedTagged)
	if !ok {
		return nil, fmt.Errorf("image reference %q has no tag; add one, such as %q", ref, ref+":1")
	}
	return t, nil
}

// Stored returns ref parsed if it is a full reference with a tag, a
// digest or both: a name an image can have in containerd's store.
func Stored(ref string) (reference.Named, error) {
	n, err := parse(ref)
	if err != nil {
		return nil, err
	}
	_, tagged := n.(reference.Tagged)
	_, digested := n.(reference.Digested)
	if !tagged && !digested {
		return nil, fmt.Errorf("image reference %q has no tag or digest; want a full reference such as %s", ref, Example)
	}
	return n, nil
}

// parse parses ref, which must be a full reference: one that normalising
// leaves as it is.
func parse(ref string) (reference.Named, error) {
	if ref == "" {
		return nil, fmt.Errorf("image reference is empty; want a full reference such as %s", Example)
	}
	n, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return nil, fmt.Errorf("image reference %q is not valid: %s", ref, reason(ref, err))
	}
	if n.String() != ref {
		return nil, fmt.Errorf("image reference %q is a short name, and containerd keeps names as given; want a full reference, such as %q or %q", ref, "localhost/"+reference.FamiliarString(n), n.String())
	}
	return n, nil
}

// reason says why ParseNormalizedNamed refused ref with err, and what
// to give instead, in words of this package's: the library's own
// messages of some errors hold the value unquoted.
func reason(ref string, err error) string {
	want := "; want a full reference such as " + Example
	switch {
	case errors.Is(err, reference.ErrNameTooLong):
		return fmt.Sprintf("the repository name is longer than %d characters", reference.RepositoryNameTotalLengthMax) + want
	case errors.Is(err, reference.ErrNameEmpty):
		return "it has no repository name" + want
	}
	if _, lower := reference.ParseNormalizedNamed(strings.ToLower(ref)); lower == nil {
		return "the repository name must be lower case" + want
	}
	if strings.Contains(ref, "@") {
		return "the digest, or the name before it, is malformed" + want
	}
	return "want [HOST[:PORT]/]PATH:TAG, PATH lower-case letters and digits (with . _ __ - between them) in components joined by /, TAG up to 128 letters, digits, _ . -; no spaces or control characters; such as " + Example
}
