package simulator

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// OAuthTokenPath is the simulator's OAuth2 token endpoint: POST a
// form-encoded refresh_token grant (RFC 6749 §6) with a refresh token from
// NewRefreshToken and any client_id (or a cloud's grant: jwt-bearer for a
// service account of RegisterServiceAccount, client_credentials for an
// application of RegisterClient; vertex.go). The answer is a bearer access token,
// which the other endpoints accept as a key until it expires, and a new
// refresh token: the one sent is spent (rotation), and sending it again is
// invalid_grant, as for an unknown one. A client of RequireClientSecret
// must send its secret, and its refresh tokens are not rotated (Google's).
// An Anthropic request made with such an access token must carry
// anthropic-beta oauth-2025-04-20.
const OAuthTokenPath = "/oauth/token"

// oauthBeta is the beta flag Anthropic requires with an OAuth access token.
const oauthBeta = "oauth-2025-04-20"

// oauthServer is the state of the token endpoint.
type oauthServer struct {
	issued atomic.Bool // some access token was issued: requests check expiry

	mu        sync.Mutex
	grants    map[string]oauthGrant // live refresh tokens
	access    map[string]time.Time  // access token → when it expires
	refreshes int                   // refresh tokens traded successfully
	last      url.Values            // the last request's form
	fail      int                   // answer every request with this status; 0: serve
	secrets   map[string]string     // client_id → the client secret its refresh_token grants must send
}

// oauthGrant is what a refresh token yields.
type oauthGrant struct {
	b   Behavior
	ttl time.Duration
}

// NewRefreshToken returns a refresh token for OAuthTokenPath whose access
// tokens are keys with behaviour b, each valid for ttl (0: one hour).
func (s *Simulator) NewRefreshToken(b Behavior, ttl time.Duration) string {
	if ttl <= 0 {
		ttl = time.Hour
	}
	rt := "sim-ort-" + randomHex()
	s.oauth.mu.Lock()
	defer s.oauth.mu.Unlock()
	if s.oauth.grants == nil {
		s.oauth.grants, s.oauth.access = map[string]oauthGrant{}, map[string]time.Time{}
	}
	s.oauth.grants[rt] = oauthGrant{b: b, ttl: ttl}
	return rt
}

// RequireClientSecret makes the refresh_token grants of client clientID
// authenticate with secret, as Google's token endpoint wants an installed
// application's (Gemini CLI's): without it the answer is 400
// invalid_request, with another 401 invalid_client. Like Google's, the
// endpoint does not rotate such a client's refresh tokens: the answer has
// none, and the one sent stays valid.
func (s *Simulator) RequireClientSecret(clientID, secret string) {
	s.oauth.mu.Lock()
	defer s.oauth.mu.Unlock()
	if s.oauth.secrets == nil {
		s.oauth.secrets = map[string]string{}
	}
	s.oauth.secrets[clientID] = secret
}

// Refreshes is how many refresh tokens the token endpoint traded for
// access tokens.
func (s *Simulator) Refreshes() int {
	s.oauth.mu.Lock()
	defer s.oauth.mu.Unlock()
	return s.oauth.refreshes
}

// LastTokenRequest is the form of the token endpoint's last request (nil
// before the first).
func (s *Simulator) LastTokenRequest() url.Values {
	s.oauth.mu.Lock()
	defer s.oauth.mu.Unlock()
	return s.oauth.last
}

// FailTokenEndpoint makes the token endpoint answer every request with
// status (a server_error body) from now on; 0 serves again.
func (s *Simulator) FailTokenEndpoint(status int) {
	s.oauth.mu.Lock()
	s.oauth.fail = status
	s.oauth.mu.Unlock()
}

// RevokeAccessToken makes an issued access token invalid before its expiry.
func (s *Simulator) RevokeAccessToken(token string) {
	s.oauth.mu.Lock()
	if _, ok := s.oauth.access[token]; ok {
		s.oauth.access[token] = time.Time{}
	}
	s.oauth.mu.Unlock()
}

// accessRefused reports whether key is an access token the token endpoint
// issued that is no longer valid, or that an Anthropic request r sends
// without the OAuth beta flag.
func (s *Simulator) accessRefused(key string, r *http.Request, ep endpoint) bool {
	if !s.oauth.issued.Load() {
		return false
	}
	s.oauth.mu.Lock()
	expires, ok := s.oauth.access[key]
	s.oauth.mu.Unlock()
	switch {
	case !ok:
		return false
	case !time.Now().Before(expires):
		return true
	case ep.anthropic():
		return !strings.Contains(strings.Join(r.Header.Values("Anthropic-Beta"), ","), oauthBeta)
	}
	return false
}

// oauthToken serves OAuthTokenPath.
func (s *Simulator) oauthToken(w http.ResponseWriter, r *http.Request) {
	o := &s.oauth
	if r.Method != http.MethodPost {
		oauthError(w, http.StatusMethodNotAllowed, "invalid_request")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	params, err := tokenParams(r)
	if err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last = params
	rt := params.Get("refresh_token")
	g, live := o.grants[rt]
	secret, confidential := o.secrets[params.Get("client_id")]
	switch {
	case o.fail != 0:
		oauthError(w, o.fail, "server_error")
		return
	case params.Get("grant_type") != "refresh_token" && s.cloudGrant(w, r, params):
		return // a cloud's grant (vertex.go)
	case params.Get("grant_type") != "refresh_token":
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	case params.Get("client_id") == "":
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	case confidential && params.Get("client_secret") == "":
		oauthError(w, http.StatusBadRequest, "invalid_request") // Google's "client_secret is missing."
		return
	case confidential && params.Get("client_secret") != secret:
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	case !live:
		oauthError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	answer := map[string]any{"token_type": "Bearer", "expires_in": int64((g.ttl + time.Second - 1) / time.Second)}
	if !confidential {
		delete(o.grants, rt)
		next := "sim-ort-" + randomHex()
		o.grants[next] = g
		answer["refresh_token"] = next
	}
	access := "sim-oat-" + randomHex()
	o.access[access] = time.Now().Add(g.ttl)
	o.refreshes++
	s.SetKey(access, g.b)
	o.issued.Store(true)
	answer["access_token"] = access
	body, _ := json.Marshal(answer)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

// oauthError answers as RFC 6749 §5.2 says.
func oauthError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write([]byte(`{"error":"` + code + `","error_description":"simulated ` + code + `"}`))
}

func randomHex() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// tokenParams reads a token request's parameters: a form (RFC 6749), or a
// JSON object of strings, as some providers' endpoints take them.
func tokenParams(r *http.Request) (url.Values, error) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		err := r.ParseForm()
		return r.PostForm, err
	}
	var object map[string]string
	if err := json.NewDecoder(r.Body).Decode(&object); err != nil {
		return nil, err
	}
	params := url.Values{}
	for name, value := range object {
		params.Set(name, value)
	}
	return params, nil
}
