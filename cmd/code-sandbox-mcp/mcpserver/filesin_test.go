package mcpserver

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"code-sandbox-mcp/exec"
)

func TestParseFiles(t *testing.T) {
	lim := pythonLimits(t)
	lim.MaxFilesIn, lim.FilesInBytes = 3, 10
	long := strings.Repeat("a", maxComponentBytes+1)
	deep := strings.Repeat("abcdefgh/", maxPathBytes/9+1) + "x"
	for _, tc := range []struct {
		name    string
		raw     string
		want    []exec.File
		wantErr string
	}{
		{"none", `[]`, []exec.File{}, ""},
		{"text", `[{"path":"data.csv","content":"a,b\n"}]`, []exec.File{{Path: "data.csv", Data: []byte("a,b\n")}}, ""},
		{"utf-8 named", `[{"path":"a/b.txt","content":"é","encoding":"utf-8"}]`, []exec.File{{Path: "a/b.txt", Data: []byte("é")}}, ""},
		{"base64", `[{"path":"x.bin","content":"AAEC/w==","encoding":"base64"}]`, []exec.File{{Path: "x.bin", Data: []byte{0, 1, 2, 255}}}, ""},
		{"base64 unpadded, wrapped", `[{"path":"x.bin","content":"AAEC\n/w","encoding":"base64"}]`, []exec.File{{Path: "x.bin", Data: []byte{0, 1, 2, 255}}}, ""},
		{"empty file", `[{"path":"empty","content":""}]`, []exec.File{{Path: "empty", Data: []byte{}}}, ""},
		{"siblings", `[{"path":"a/b","content":""},{"path":"a/c","content":""},{"path":"ab","content":""}]`,
			[]exec.File{{Path: "a/b", Data: []byte{}}, {Path: "a/c", Data: []byte{}}, {Path: "ab", Data: []byte{}}}, ""},
		{"space and unicode", `[{"path":"my data/Ünïcode.txt","content":"x"}]`, []exec.File{{Path: "my data/Ünïcode.txt", Data: []byte("x")}}, ""},

		{"null", `null`, nil, `argument "files" must be an array of {"path": ..., "content": ...} objects, not null`},
		{"object", `{"path":"a","content":"b"}`, nil, "must be an array of"},
		{"too many", `[{"path":"a","content":""},{"path":"b","content":""},{"path":"c","content":""},{"path":"d","content":""}]`, nil, "has 4 entries; at most 3 (max_files_in)"},
		{"too big", `[{"path":"a","content":"123456"},{"path":"b","content":"12345"}]`, nil, "holds 11 bytes decoded; at most 10B (10 bytes) in all (files_in_bytes)"},
		{"entry not an object", `["a.txt"]`, nil, `files[0] must be an object {"path": ..., "content": ...}, not a string`},
		{"unknown key", `[{"path":"a.txt","content":"","mode":"0644"}]`, nil, `files[0] ("a.txt") has unknown key "mode"`},
		{"unknown key, no path", `[{"name":"a.txt","content":""}]`, nil, `files[0] has unknown key "name"`},
		{"no path", `[{"content":"x"}]`, nil, `files[0] has no "path"`},
		{"path not a string", `[{"path":3,"content":"x"}]`, nil, `files[0]: "path" must be a string, not a number`},
		{"null path", `[{"path":null,"content":"x"}]`, nil, `files[0]: "path" must be a string, not null`},
		{"no content", `[{"path":"a.txt"}]`, nil, `files[0] ("a.txt") has no "content"`},
		{"content not a string", `[{"path":"a.txt","content":{"x":1}}]`, nil, `files[0] ("a.txt"): "content" must be a string, not an object`},
		{"null content", `[{"path":"a.txt","content":null}]`, nil, `"content" must be a string, not null`},
		{"unknown encoding", `[{"path":"a.txt","content":"x","encoding":"hex"}]`, nil, `files[0] ("a.txt"): unknown encoding "hex"; want "utf-8" (the default) or "base64"`},
		{"encoding not a string", `[{"path":"a.txt","content":"x","encoding":true}]`, nil, `"encoding" must be "utf-8" or "base64", not a boolean`},
		{"bad base64", `[{"path":"ok","content":""},{"path":"b.bin","content":"not base64!","encoding":"base64"}]`, nil, `files[1] ("b.bin"): "content" is not valid base64`},
		{"empty path", `[{"path":"","content":"x"}]`, nil, `files[0]: "path" is empty`},
		{"absolute", `[{"path":"/etc/passwd","content":"x"}]`, nil, `files[0] ("/etc/passwd"): path "/etc/passwd" is absolute; give it relative to /workspace, the program's working directory, such as "etc/passwd"`},
		{"absolute in workspace", `[{"path":"/workspace/d/a.csv","content":"x"}]`, nil, `such as "d/a.csv"`},
		{"dot dot", `[{"path":"a/../../b","content":"x"}]`, nil, `path "a/../../b" has a ".." component`},
		{"dot", `[{"path":"./a.csv","content":"x"}]`, nil, `path "./a.csv" has a "." component; write it as "a.csv"`},
		{"inner dot", `[{"path":"a/./b","content":"x"}]`, nil, `has a "." component; write it as "a/b"`},
		{"double slash", `[{"path":"a//b","content":"x"}]`, nil, `path "a//b" has an empty component (a "//" or a trailing "/"); write it as "a/b"`},
		{"trailing slash", `[{"path":"a/","content":"x"}]`, nil, `has an empty component`},
		{"nul", `[{"path":"a\u0000b","content":"x"}]`, nil, `holds a NUL byte`},
		{"control", `[{"path":"a\nb","content":"x"}]`, nil, `not printable`},
		{"backslash", `[{"path":"dir\\a.csv","content":"x"}]`, nil, `holds a backslash; separate directories with "/"`},
		{"long component", `[{"path":"` + long + `","content":"x"}]`, nil, "has a component of 256 bytes; at most 255"},
		{"long path", `[{"path":"` + deep + `","content":"x"}]`, nil, "bytes long; at most 4084"},
		{"duplicate", `[{"path":"a.csv","content":"x"},{"path":"b","content":"x"},{"path":"a.csv","content":"y"}]`, nil, `files[2]: path "a.csv" is files[0]'s too`},
		{"file then dir", `[{"path":"a","content":"x"},{"path":"a/b","content":"x"}]`, nil, `files[1]: path "a/b" puts a file under "a", which is files[0], a file`},
		{"dir then file", `[{"path":"a/b/c","content":"x"},{"path":"a/b","content":"x"}]`, nil, `files[1]: path "a/b" is a directory in files[0]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseFiles(json.RawMessage(tc.raw), lim)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v; want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// A language that takes no files says so.
func TestParseFilesNoneAllowed(t *testing.T) {
	lim := pythonLimits(t)
	lim.MaxFilesIn = 0
	if _, err := parseFiles(json.RawMessage(`[{"path":"a","content":""}]`), lim); err == nil || !strings.Contains(err.Error(), "takes no files") {
		t.Errorf("error %v; want one saying no files are taken", err)
	}
	if _, err := parseFiles(json.RawMessage(`[]`), lim); err != nil {
		t.Errorf("no files: %v", err)
	}
}

// The files argument goes through parseArgs, and its errors end up in a
// result that says nothing was run.
func TestParseArgsFiles(t *testing.T) {
	lim := pythonLimits(t)
	a, err := parseArgs(map[string]any{"code": "x", "files": []any{map[string]any{"path": "in.txt", "content": "hi"}}}, "python", lim, nil, false, false)
	if err != nil || !reflect.DeepEqual(a.files, []exec.File{{Path: "in.txt", Data: []byte("hi")}}) {
		t.Errorf("got %+v, %v", a, err)
	}
	c := runClient(t, noRun(t))
	text, isErr, _ := callTool(t, t.Context(), c, "run_python_code", map[string]any{"code": "x", "files": []any{map[string]any{"path": "../x", "content": ""}}})
	if !isErr || !strings.Contains(text, `files[0] ("../x"): path "../x" has a ".." component`) || !strings.HasSuffix(text, "Nothing was run.") {
		t.Errorf("%q, isError %v; want the entry named and nothing run", text, isErr)
	}
}
