package admin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/authn"
)

// The web console's sessions. Signing in trades an admin token for a
// cookie, so the browser never keeps the token: the cookie names the token
// and carries a MAC keyed by that token's hash, which only this listener
// (and every replica configured with the same token) knows. Nothing is
// stored server-side, so any replica accepts a session another issued, a
// token's role applies as it is now (not as it was at sign-in), and
// removing or changing a token ends its sessions at once.
//
// A write through a session must also carry the session's CSRF token in
// the X-Sluice-CSRF header: a page on another origin can make the browser
// send the cookie (were SameSite=Strict ever bypassed) but cannot read the
// CSRF token, which only GET /console/session returns to the console's own
// script.
const (
	sessionCookie = "sluice_console"
	sessionPath   = "/console/session"
	csrfHeader    = "X-Sluice-CSRF"
	// SessionTTL is how long a console session lasts; signing in again
	// starts a new one.
	SessionTTL = 8 * time.Hour
)

// sessionClaims are what a session cookie carries, signed.
type sessionClaims struct {
	Token   string `json:"t"` // the admin token's ID
	Expires int64  `json:"e"` // Unix seconds
	Nonce   string `json:"n"` // random per sign-in; the CSRF token is derived from it
}

// sessionInfo is what GET and POST /console/session answer.
type sessionInfo struct {
	TokenID   string    `json:"token_id"`
	Role      Role      `json:"role"`
	CSRF      string    `json:"csrf"`
	ExpiresAt time.Time `json:"expires_at"`
}

// sessionKey is the MAC key of t's sessions: derived from its secret's
// hash, so it changes when the secret does.
func (t token) sessionKey() []byte {
	m := hmac.New(sha256.New, t.sum[:])
	m.Write([]byte("sluice console session v1"))
	return m.Sum(nil)
}

// mac signs msg with t's session key.
func (t token) mac(msg string) []byte {
	m := hmac.New(sha256.New, t.sessionKey())
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// csrf is the CSRF token of the session with this nonce.
func (t token) csrf(nonce string) string {
	return base64.RawURLEncoding.EncodeToString(t.mac("csrf|" + nonce))
}

// sessionCookieValue signs claims for t.
func (t token) sessionCookieValue(c sessionClaims) string {
	b, _ := json.Marshal(c) // a struct of strings and an int
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(t.mac(payload))
}

// session finds the token and claims of r's session cookie, if it has a
// valid, unexpired one.
func (s *server) session(r *http.Request) (token, sessionClaims, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return token{}, sessionClaims{}, false
	}
	payload, sig, ok := strings.Cut(c.Value, ".")
	if !ok {
		return token{}, sessionClaims{}, false
	}
	raw, err1 := base64.RawURLEncoding.DecodeString(payload)
	mac, err2 := base64.RawURLEncoding.DecodeString(sig)
	var claims sessionClaims
	if err1 != nil || err2 != nil || json.Unmarshal(raw, &claims) != nil {
		return token{}, sessionClaims{}, false
	}
	for _, t := range s.tokens {
		if t.id == claims.Token && hmac.Equal(mac, t.mac(payload)) {
			if s.now().Unix() >= claims.Expires {
				return token{}, sessionClaims{}, false
			}
			return t, claims, true
		}
	}
	return token{}, sessionClaims{}, false
}

// sessionWriteAllowed reports whether a write through a session carries
// the session's CSRF token.
func sessionWriteAllowed(r *http.Request, t token, c sessionClaims) bool {
	got := r.Header.Get(csrfHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(t.csrf(c.Nonce))) == 1
}

// serveSession signs in (POST, with {"token": "…"}), tells the console who
// is signed in (GET), and signs out (DELETE, with the CSRF token).
func (s *server) serveSession(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	switch r.Method {
	case http.MethodGet:
		t, c, ok := s.session(r)
		if !ok {
			writeError(w, &sluice.Error{Code: CodeUnauthorized, Msg: "not signed in"})
			return
		}
		s.writeSession(w, t, c)
	case http.MethodPost:
		s.signIn(w, r)
	case http.MethodDelete:
		t, c, ok := s.session(r)
		if ok && !sessionWriteAllowed(r, t, c) {
			writeError(w, &sluice.Error{Code: CodeForbidden, Msg: "missing or wrong " + csrfHeader + " header"})
			return
		}
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: overTLS(r)})
		if ok {
			s.log.LogAttrs(r.Context(), slog.LevelInfo, "console sign-out", slog.String("token_id", t.id))
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeError(w, sluice.Errorf(sluice.CodeMethodNotAllowed, r.Method+" is not allowed on "+sessionPath))
	}
}

// signIn checks the admin token posted and, when it is one, sets a new
// session cookie. Wrong tokens count against the address as wrong bearer
// tokens do.
func (s *server) signIn(w http.ResponseWriter, r *http.Request) {
	source := authn.Source(r)
	if wait, refused := s.throttle.Refused(source); refused {
		writeError(w, &sluice.Error{Code: sluice.CodeAuthThrottled, RetryAfter: wait,
			Msg: "too many failed admin tokens from this address; retry after the Retry-After"})
		return
	}
	var in struct {
		Token string `json:"token"`
	}
	if err := decodeJSON(w, r, &in, false); err != nil {
		s.fail(w, r, err)
		return
	}
	t, ok := s.match(in.Token)
	if !ok {
		s.throttle.Failed(source)
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "console sign-in refused", slog.String("remote", r.RemoteAddr))
		writeError(w, &sluice.Error{Code: CodeUnauthorized, Msg: "that is not an admin token of this gateway"})
		return
	}
	var nonce [16]byte
	rand.Read(nonce[:])
	c := sessionClaims{Token: t.id, Expires: s.now().Add(SessionTTL).Unix(), Nonce: hex.EncodeToString(nonce[:])}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: t.sessionCookieValue(c), Path: "/", MaxAge: int(SessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)})
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "console sign-in", slog.String("token_id", t.id), slog.String("role", string(t.role)),
		slog.String("remote", r.RemoteAddr))
	s.writeSession(w, t, c)
}

func (s *server) writeSession(w http.ResponseWriter, t token, c sessionClaims) {
	writeJSON(w, http.StatusOK, sessionInfo{TokenID: t.id, Role: t.role, CSRF: t.csrf(c.Nonce), ExpiresAt: time.Unix(c.Expires, 0).UTC()})
}

// overTLS reports whether the browser reached the console over HTTPS:
// directly, or through a proxy that says so. Believing the header costs
// nothing: it can only keep a cookie off plain HTTP.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}
