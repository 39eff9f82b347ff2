package exec

import (
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"code-sandbox-mcp/config"
)

// TestCheck validates requests against their language. It reaches check
// through the smallest surface, an Executor with only its languages.
func TestCheck(t *testing.T) {
	py := config.Language{Name: "python", Limits: config.Limits{CodeBytes: 10, Timeout: 5 * time.Second, MaxTimeout: 30 * time.Second}}
	js := config.Language{Name: "javascript", Limits: config.Limits{CodeBytes: 100, Timeout: 7 * time.Second, MaxTimeout: 60 * time.Second}}
	e := &Executor{}
	e.langs = map[string]*language{"python": newLanguage(e, py), "javascript": newLanguage(e, js)}

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
			if lang.cfg.Name != tc.lang || timeout != tc.timeout {
				t.Errorf("check(%+v): got language %q, timeout %s; want %q, %s", tc.req, lang.cfg.Name, timeout, tc.lang, tc.timeout)
			}
		})
	}
}
