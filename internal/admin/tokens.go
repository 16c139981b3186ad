package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Role is what an admin token may do.
type Role string

// The roles of admin tokens.
const (
	RoleRead  Role = "read"  // GET and HEAD only
	RoleWrite Role = "write" // everything
)

// Token is one admin bearer token. The audit log records its ID, never its
// Secret.
type Token struct {
	ID     string
	Secret string // compared in constant time; never logged
	Role   Role
}

// token is a Token as the server keeps it: the secret only as its hash.
type token struct {
	id   string
	role Role
	sum  [sha256.Size]byte
}

// compileTokens hashes the secrets; a token without a secret is dropped,
// so it can never match.
func compileTokens(tokens []Token) []token {
	out := make([]token, 0, len(tokens))
	for _, t := range tokens {
		if t.Secret != "" {
			out = append(out, token{id: t.ID, role: t.Role, sum: sha256.Sum256([]byte(t.Secret))})
		}
	}
	return out
}

// authorize finds the token the request presents: a bearer token, or else
// a console session's (see session.go). A write through a session must
// carry its CSRF token: csrfOK is false when it does not.
func (s *server) authorize(r *http.Request) (t token, ok, csrfOK bool) {
	if tok, present := bearer(r); present {
		t, ok = s.match(tok)
		return t, ok, true
	}
	t, claims, ok := s.session(r)
	if !ok {
		return token{}, false, false
	}
	return t, true, readOnly(r.Method) || sessionWriteAllowed(r, t, claims)
}

// match finds the admin token whose secret is tok. Both sides are hashed
// first and every token is compared, so that neither the comparison's time
// nor an early length mismatch tells a caller how long a token is or which
// one came close.
func (s *server) match(tok string) (token, bool) {
	if tok == "" {
		return token{}, false
	}
	sum := sha256.Sum256([]byte(tok))
	found := -1
	for i := range s.tokens {
		if subtle.ConstantTimeCompare(sum[:], s.tokens[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return token{}, false
	}
	return s.tokens[found], true
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) <= 7 || !strings.EqualFold(h[:7], "bearer ") {
		return "", false
	}
	tok := strings.TrimSpace(h[7:])
	return tok, tok != ""
}

// readOnly reports whether the method only reads: all a read token may use.
func readOnly(method string) bool {
	return method == http.MethodGet || method == http.MethodHead
}
