package exec

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec/internal/pool"
)

// TestCheck validates requests against their language. It reaches check
// through the smallest surface, an Executor with only its languages.
func TestCheck(t *testing.T) {
	py := config.Language{Name: "python", Limits: config.Limits{CodeBytes: 10, Timeout: 5 * time.Second, MaxTimeout: 30 * time.Second}}
	js := config.Language{Name: "javascript", Limits: config.Limits{CodeBytes: 100, Timeout: 7 * time.Second, MaxTimeout: 60 * time.Second}}
	e := &Executor{}
	e.langs = map[string]*pool.Language{"python": pool.New(pool.Config{}, py), "javascript": pool.New(pool.Config{}, js)}

	for _, tc := range []struct {
		name    string
		req     Request
		wantErr string // a part of the error; empty for none
		lang    string
		timeout time.Duration
	}{
		{"unknown language", Request{Language: "ruby", Code: "1"}, `unknown language "ruby"`, "", 0},
		{"code over the cap", Request{Language: "python", Code: strings.Repeat("x", 11)}, "11 bytes, over the limit of 10", "", 0},
		{"code of exactly the cap", Request{Language: "python", Code: strings.Repeat("x", 10)}, "", "python", 5 * time.Second},
		{"the cap is the language's", Request{Language: "javascript", Code: strings.Repeat("x", 11)}, "", "javascript", 7 * time.Second},
		{"negative timeout", Request{Language: "python", Code: "1", Timeout: -time.Second}, "negative", "", 0},
		{"over the maximum timeout", Request{Language: "python", Code: "1", Timeout: 31 * time.Second}, "over the maximum of 30s", "", 0},
		{"the maximum timeout", Request{Language: "python", Code: "1", Timeout: 30 * time.Second}, "", "python", 30 * time.Second},
		{"zero keeps the default", Request{Language: "javascript", Code: "1"}, "", "javascript", 7 * time.Second},
		{"a valid override", Request{Language: "javascript", Code: "1", Timeout: 45 * time.Second}, "", "javascript", 45 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lang, timeout, err := e.check(tc.req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errdefs.IsInvalidArgument(err) {
					t.Errorf("check(%+v): got error %v; want an invalid-argument error saying %q", tc.req, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("check(%+v): got error %v; want none", tc.req, err)
			}
			if lang.Config().Name != tc.lang || timeout != tc.timeout {
				t.Errorf("check(%+v): got language %q, timeout %s; want %q, %s", tc.req, lang.Config().Name, timeout, tc.lang, tc.timeout)
			}
		})
	}
}

// New refuses a bad configuration before any I/O: it creates no state
// directory and dials no containerd (there is none at Address). A
// language named twice, and limits the configuration's own rules refuse
// (they are the same rules whether a configuration file or a caller of
// exec made the language), are refused alike.
func TestNewValidatesBeforeIO(t *testing.T) {
	lang, ok := config.Default().Language("python")
	if !ok {
		t.Fatal("the default configuration has no python")
	}
	noMemory := lang
	noMemory.Limits.MemoryBytes = 0
	for _, tc := range []struct {
		name  string
		langs []config.Language
		want  string
	}{
		{"a language twice", []config.Language{lang, lang}, `language "python" is configured twice`},
		{"no memory limit", []config.Language{noMemory}, "languages.python.limits.memory"},
	} {
		state := filepath.Join(t.TempDir(), "state")
		_, err := New(context.Background(), Config{
			Address:   filepath.Join(t.TempDir(), "no-containerd.sock"),
			Namespace: "test",
			StateDir:  state,
			Languages: tc.langs,
			UIDs:      config.UIDRange{First: 100000, Last: 100010},
		})
		if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("New with %s: got %v; want an invalid-argument error with %q", tc.name, err, tc.want)
		}
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("%s: state directory after the refusal: %v; want it never created", tc.name, err)
		}
	}
}
