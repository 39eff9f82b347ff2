package mcpserver

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"unicode"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
	"code-sandbox-mcp/oci"
)

// Caps on a path of the files argument, in bytes. A component is at most
// a Linux file name (NAME_MAX); the whole path is short enough that
// oci.WorkspaceDir, a slash, the path and its NUL fit PATH_MAX.
const (
	maxComponentBytes = 255
	maxPathBytes      = 4096 - len(oci.WorkspaceDir) - 2
)

// Encodings of a file's content in the files argument.
const (
	encodingUTF8   = "utf-8"
	encodingBase64 = "base64"
)

// filesItemSchema is the JSON Schema of one entry of the files argument.
var filesItemSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"path": map[string]any{
			"type":        "string",
			"minLength":   1,
			"description": "Where the file goes, relative to " + oci.WorkspaceDir + ", with / between directories, such as data/input.csv.",
		},
		"content": map[string]any{
			"type":        "string",
			"description": "The file's content: the text itself, or its bytes in base64 if encoding is base64.",
		},
		"encoding": map[string]any{
			"type":        "string",
			"enum":        []string{encodingUTF8, encodingBase64},
			"default":     encodingUTF8,
			"description": "How content is written: utf-8 for text, base64 for binary files.",
		},
	},
	"required":             []string{"path", "content"},
	"additionalProperties": false,
}

// parseFiles validates the files argument and decodes its contents: at
// most lim.MaxFilesIn entries holding at most lim.FilesInBytes in all,
// each a path (see checkPath) no other entry has or lies under, and a
// content in its encoding. Errors name the entry by index and path.
func parseFiles(raw json.RawMessage, lim config.Limits) ([]exec.File, error) {
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil || isNull(raw) {
		return nil, fmt.Errorf(`argument "files" must be an array of {"path": ..., "content": ...} objects, not %s; leave it out for no files`, jsonKind(raw))
	}
	if len(entries) > lim.MaxFilesIn {
		if lim.MaxFilesIn == 0 {
			return nil, errors.New(`argument "files" is refused: this server takes no files (max_files_in is 0); leave it out`)
		}
		return nil, fmt.Errorf(`argument "files" has %d entries; at most %d (max_files_in): pass fewer files, or pack them into one archive`, len(entries), lim.MaxFilesIn)
	}
	files := make([]exec.File, 0, len(entries))
	seen := pathSet{files: map[string]int{}, dirs: map[string]int{}}
	var total int64
	for i, e := range entries {
		f, err := parseFile(i, e)
		if err != nil {
			return nil, err
		}
		if err := seen.add(i, f.Path); err != nil {
			return nil, err
		}
		total += int64(len(f.Data))
		files = append(files, f)
	}
	if total > lim.FilesInBytes {
		return nil, fmt.Errorf(`argument "files" holds %d bytes decoded; at most %s (%d bytes) in all (files_in_bytes): pass smaller files, or have the program make the data itself`,
			total, config.Size(lim.FilesInBytes), lim.FilesInBytes)
	}
	return files, nil
}

// parseFile validates and decodes entry i of the files argument.
func parseFile(i int, raw json.RawMessage) (exec.File, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return exec.File{}, fmt.Errorf(`files[%d] must be an object {"path": ..., "content": ...}, not %s`, i, jsonKind(raw))
	}
	var p string
	name := fmt.Sprintf("files[%d]", i)
	if json.Unmarshal(m["path"], &p) == nil && p != "" {
		name = fmt.Sprintf("files[%d] (%q)", i, p)
	}
	for k := range m {
		if k != "path" && k != "content" && k != "encoding" {
			return exec.File{}, fmt.Errorf(`%s has unknown key %q: an entry takes "path", "content" and optionally "encoding"`, name, k)
		}
	}
	rp, ok := m["path"]
	if !ok {
		return exec.File{}, fmt.Errorf(`%s has no "path": give where the file goes, relative to %s`, name, oci.WorkspaceDir)
	}
	if err := json.Unmarshal(rp, &p); err != nil || isNull(rp) {
		return exec.File{}, fmt.Errorf(`%s: "path" must be a string, not %s`, name, jsonKind(rp))
	}
	if err := checkPath(p); err != nil {
		return exec.File{}, fmt.Errorf("%s: %w", name, err)
	}
	encoding := encodingUTF8
	if re, ok := m["encoding"]; ok {
		if err := json.Unmarshal(re, &encoding); err != nil || isNull(re) {
			return exec.File{}, fmt.Errorf(`%s: "encoding" must be "utf-8" or "base64", not %s`, name, jsonKind(re))
		}
	}
	rc, ok := m["content"]
	if !ok {
		return exec.File{}, fmt.Errorf(`%s has no "content": give the file's text, or its bytes in base64 with "encoding": "base64"`, name)
	}
	var content string
	if err := json.Unmarshal(rc, &content); err != nil || isNull(rc) {
		return exec.File{}, fmt.Errorf(`%s: "content" must be a string, not %s; for binary data send base64 with "encoding": "base64"`, name, jsonKind(rc))
	}
	switch encoding {
	case encodingUTF8:
		return exec.File{Path: p, Data: []byte(content)}, nil
	case encodingBase64:
		data, err := decodeBase64(content)
		if err != nil {
			return exec.File{}, fmt.Errorf(`%s: "content" is not valid base64 (standard alphabet: A-Z a-z 0-9 + /): %v`, name, err)
		}
		return exec.File{Path: p, Data: data}, nil
	default:
		return exec.File{}, fmt.Errorf(`%s: unknown encoding %q; want "utf-8" (the default) or "base64"`, name, encoding)
	}
}

// decodeBase64 decodes standard base64, ignoring white space, with or
// without its "=" padding.
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
	if len(s)%4 != 0 && !strings.HasSuffix(s, "=") {
		return base64.RawStdEncoding.DecodeString(s)
	}
	return base64.StdEncoding.DecodeString(s)
}

// checkPath checks a path of the files argument: relative to
// oci.WorkspaceDir, slash-separated and clean, printable, within the length
// caps. A backslash is refused rather than taken as part of a name: in a
// path a model writes it is a Windows separator far more often than not.
func checkPath(p string) error {
	switch {
	case p == "":
		return errors.New(`"path" is empty: give where the file goes, relative to ` + oci.WorkspaceDir + `, such as "data.csv"`)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("path %q holds a NUL byte", p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute; give it relative to %s, the program's working directory, such as %q", p, oci.WorkspaceDir, relativeHint(p))
	case strings.ContainsRune(p, '\\'):
		return fmt.Errorf(`path %q holds a backslash; separate directories with "/"`, p)
	case strings.IndexFunc(p, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("path %q holds a character that is not printable (a control character or a space other than U+0020)", p)
	case len(p) > maxPathBytes:
		return fmt.Errorf("path %.40q... is %d bytes long; at most %d", p, len(p), maxPathBytes)
	}
	for _, c := range strings.Split(p, "/") {
		switch {
		case c == "":
			return fmt.Errorf(`path %q has an empty component (a "//" or a trailing "/"); write it as %q`, p, cleanHint(p))
		case c == ".":
			return fmt.Errorf(`path %q has a "." component; write it as %q`, p, cleanHint(p))
		case c == "..":
			return fmt.Errorf(`path %q has a ".." component; files stay inside %s`, p, oci.WorkspaceDir)
		case len(c) > maxComponentBytes:
			return fmt.Errorf("path %q has a component of %d bytes; at most %d", p, len(c), maxComponentBytes)
		}
	}
	return nil
}

// relativeHint is an absolute path made relative to oci.WorkspaceDir.
func relativeHint(p string) string {
	if rest, ok := strings.CutPrefix(p, oci.WorkspaceDir+"/"); ok && rest != "" {
		return cleanHint(rest)
	}
	return cleanHint(strings.TrimLeft(p, "/"))
}

// cleanHint is p without its empty and "." components.
func cleanHint(p string) string {
	var kept []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			kept = append(kept, c)
		}
	}
	return strings.Join(kept, "/")
}

// pathSet is the paths of the files argument seen so far, to refuse a
// path twice, and a path that is a file in one entry and a directory in
// another. Both map a path to the index of the entry that made it.
type pathSet struct {
	files map[string]int
	dirs  map[string]int
}

// add records entry i's path p, a checked one.
func (s pathSet) add(i int, p string) error {
	if j, ok := s.files[p]; ok {
		return fmt.Errorf("files[%d]: path %q is files[%d]'s too; give each path once", i, p, j)
	}
	if j, ok := s.dirs[p]; ok {
		return fmt.Errorf("files[%d]: path %q is a directory in files[%d]; a path cannot be both a file and a directory", i, p, j)
	}
	for d := range parentDirs(p) {
		if j, ok := s.files[d]; ok {
			return fmt.Errorf("files[%d]: path %q puts a file under %q, which is files[%d], a file; a path cannot be both a file and a directory", i, p, d, j)
		}
	}
	s.files[p] = i
	for d := range parentDirs(p) {
		if _, ok := s.dirs[d]; !ok {
			s.dirs[d] = i
		}
	}
	return nil
}

// parentDirs yields the directories p lies under, "a" and "a/b" for
// "a/b/c".
func parentDirs(p string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := range len(p) {
			if p[i] == '/' && !yield(p[:i]) {
				return
			}
		}
	}
}

// isNull reports whether raw is JSON null.
func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}
