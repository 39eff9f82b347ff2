package httpauth

import (
	"context"
	"net/http"
	"strings"
)

// The reasons Require gives onFailure: a fixed few, so that they can
// label a metric. None names a client or holds a token.
const (
	ReasonMissing   = "missing token"           // no Authorization header
	ReasonMalformed = "malformed authorization" // not one header of "Bearer TOKEN"
	ReasonInvalid   = "invalid token"           // a well-formed token that is no client's
)

// b64tokenExtra are the characters of RFC 6750's b64token besides letters
// and digits.
const b64tokenExtra = "-._~+/"

// Require serves next only the requests that carry the token of a client
// of t, as "Authorization: Bearer TOKEN" (RFC 6750), with that client's
// name as the principal in the request's context (see Principal) and the
// Authorization header removed, so that nothing after it can log the
// token. Any other request gets 401 with a WWW-Authenticate challenge:
// "Bearer" when the header is missing, with error="invalid_request" when
// it is malformed and error="invalid_token" when the token is wrong. The
// body says which of the three it was and nothing about which names
// exist. onFailure, if not nil, is called with the request and one of the
// Reason constants before the 401 is written.
func Require(t *Tokens, next http.Handler, onFailure func(r *http.Request, reason string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, reason := bearer(r.Header)
		name, ok := "", false
		if reason == "" {
			if name, ok = t.Lookup(token); !ok {
				reason = ReasonInvalid
			}
		}
		if !ok {
			if onFailure != nil {
				onFailure(r, reason)
			}
			unauthorized(w, reason)
			return
		}
		r = r.WithContext(withPrincipal(r.Context(), name))
		r.Header = r.Header.Clone()
		r.Header.Del("Authorization")
		next.ServeHTTP(w, r)
	})
}

// bearer returns the token of the request's Authorization header, or
// why there is none: ReasonMissing or ReasonMalformed.
func bearer(h http.Header) (token, reason string) {
	values := h.Values("Authorization")
	switch {
	case len(values) == 0:
		return "", ReasonMissing
	case len(values) > 1:
		return "", ReasonMalformed
	}
	scheme, token, found := strings.Cut(values[0], " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", ReasonMalformed
	}
	token = strings.TrimLeft(token, " ")
	if !isB64Token(token) {
		return "", ReasonMalformed
	}
	return token, ""
}

// isB64Token reports whether s is an RFC 6750 b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for _, c := range body {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(b64tokenExtra, c)) {
			return false
		}
	}
	return true
}

// unauthorized writes the 401 for reason.
func unauthorized(w http.ResponseWriter, reason string) {
	var c, body string
	switch reason {
	case ReasonMissing:
		c, body = "Bearer", "unauthorized: send Authorization: Bearer TOKEN"
	case ReasonMalformed:
		c, body = `Bearer error="invalid_request"`, `unauthorized: malformed Authorization header; want one, "Bearer TOKEN"`
	default:
		c, body = `Bearer error="invalid_token"`, "unauthorized: invalid token"
	}
	w.Header().Set("WWW-Authenticate", c)
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, body, http.StatusUnauthorized)
}

// principalKey is the context key of the principal.
type principalKey struct{}

// withPrincipal returns a copy of ctx whose principal is name: the client
// on whose behalf the request is made.
func withPrincipal(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, principalKey{}, name)
}

// Principal returns the principal withPrincipal put in ctx, and whether
// there is one.
func Principal(ctx context.Context) (string, bool) {
	name, ok := ctx.Value(principalKey{}).(string)
	return name, ok
}
