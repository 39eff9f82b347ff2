package httpauth

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// tokens returns the clients alice (token tok-a) and bob (tok-b), read
// from a real file.
func tokens(t *testing.T) *Tokens {
	t.Helper()
	toks, err := Load(writeFile(t, "alice "+sumHex("tok-a")+"\nbob "+sumHex("tok-b")+"\n", 0o600))
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

func TestRequireRefuses(t *testing.T) {
	for _, tc := range []struct {
		name      string
		header    []string // Authorization values
		reason    string
		challenge string
	}{
		{"missing", nil, ReasonMissing, "Bearer"},
		{"empty", []string{""}, ReasonMalformed, `Bearer error="invalid_request"`},
		{"scheme alone", []string{"Bearer"}, ReasonMalformed, `Bearer error="invalid_request"`},
		{"scheme and space", []string{"Bearer "}, ReasonMalformed, `Bearer error="invalid_request"`},
		{"basic", []string{"Basic YWxpY2U6dG9rLWE="}, ReasonMalformed, `Bearer error="invalid_request"`},
		{"bad characters", []string{"Bearer tok-a tok-b"}, ReasonMalformed, `Bearer error="invalid_request"`},
		{"two headers", []string{"Bearer tok-a", "Bearer tok-b"}, ReasonMalformed, `Bearer error="invalid_request"`},
		{"wrong", []string{"Bearer tok-c"}, ReasonInvalid, `Bearer error="invalid_token"`},
		{"name as token", []string{"Bearer alice"}, ReasonInvalid, `Bearer error="invalid_token"`},
		{"prefix of a token", []string{"Bearer tok-"}, ReasonInvalid, `Bearer error="invalid_token"`},
		{"hash as token", []string{"Bearer " + sumHex("tok-a")}, ReasonInvalid, `Bearer error="invalid_token"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var failed []string
			h := Require(tokens(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				t.Error("the handler ran for a refused request")
			}), func(r *http.Request, reason string) {
				if r.URL.Path != "/mcp" {
					t.Errorf("onFailure: got path %q; want /mcp", r.URL.Path)
				}
				failed = append(failed, reason)
			})
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
			for _, v := range tc.header {
				req.Header.Add("Authorization", v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("status: got %d; want 401", rec.Code)
			}
			if got := rec.Header().Values("WWW-Authenticate"); len(got) != 1 || got[0] != tc.challenge {
				t.Errorf("WWW-Authenticate: got %q; want [%q]", got, tc.challenge)
			}
			if len(failed) != 1 || failed[0] != tc.reason {
				t.Errorf("onFailure: got reasons %q; want [%q]", failed, tc.reason)
			}
			body := rec.Body.String()
			for _, secret := range []string{"alice", "bob", "tok-a", "tok-b", sumHex("tok-a")} {
				if strings.Contains(body, secret) {
					t.Errorf("body %q names %q", body, secret)
				}
			}
		})
	}
}

func TestRequireRefusesWithoutOnFailure(t *testing.T) {
	h := Require(tokens(t), http.NotFoundHandler(), nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/mcp", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("status: got %d; want 401", rec.Code)
	}
}

func TestRequirePrincipal(t *testing.T) {
	srv := httptest.NewServer(Require(tokens(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := Principal(r.Context())
		if !ok {
			t.Error("no principal in the context")
		}
		if v := r.Header.Get("Authorization"); v != "" {
			t.Errorf("the handler sees Authorization %q; want it removed", v)
		}
		io.WriteString(w, name)
	}), func(r *http.Request, reason string) { t.Errorf("onFailure(%q) for a good token", reason) }))
	defer srv.Close()
	for _, tc := range []struct{ header, want string }{
		{"Bearer tok-a", "alice"},
		{"bearer tok-b", "bob"},
		{"BEARER  tok-a", "alice"},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/mcp", nil)
		req.Header.Set("Authorization", tc.header)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != tc.want {
			t.Errorf("%q: got %d %q; want 200 %q", tc.header, resp.StatusCode, body, tc.want)
		}
	}
}

func TestPrincipal(t *testing.T) {
	if name, ok := Principal(context.Background()); ok {
		t.Errorf("Principal of a bare context: got %q; want none", name)
	}
	if name, ok := Principal(withPrincipal(context.Background(), "local")); !ok || name != "local" {
		t.Errorf("Principal: got %q, %v; want local, true", name, ok)
	}
}
