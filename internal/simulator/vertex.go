package simulator

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The clouds that host providers' protocols, as Sluice's hosted dialects
// speak to them. Each checks what its cloud checks (the path, the
// credential, its own body rules), records the request as it came
// (HostedRequests), then serves it as the provider's own API would, with
// that API's behaviour, usage, streams and errors: the request is
// rewritten to the provider's path, credential and body.
//
// Vertex AI: POST /v1/projects/{p}/locations/{l}/publishers/google/models/
// {m}:generateContent, :streamGenerateContent (?alt=sse), :countTokens
// (Gemini), and …/publishers/anthropic/models/{m}:rawPredict,
// :streamRawPredict (Anthropic Messages without "model" and with
// "anthropic_version": "vertex-2023-10-16"). The credential is a Google
// access token (Authorization: Bearer) that the token endpoint issued for
// a registered service account's signed assertion (RFC 7523), or one set
// with SetKey; errors before the provider's are Google's envelope.

// VertexAnthropicVersion is the anthropic_version Vertex takes in the body.
const VertexAnthropicVersion = "vertex-2023-10-16"

// CloudScope is the scope a service account's assertion must ask for.
const CloudScope = "https://www.googleapis.com/auth/cloud-platform"

// cloudState is the clouds' credentials and what they were sent.
type cloudState struct {
	mu       sync.Mutex
	accounts map[string]cloudPrincipal // service accounts by client_email
	clients  map[string]cloudPrincipal // Entra ID applications by client_id
	access   map[string]time.Time      // issued access token → when it expires
	issued   int                       // access tokens issued by the cloud grants
	requests []HostedRequest
}

// cloudPrincipal is who may ask the token endpoint for tokens, and what
// their tokens do.
type cloudPrincipal struct {
	key    *rsa.PublicKey // a service account's
	secret string         // an application's client secret
	b      Behavior
	ttl    time.Duration
}

// HostedRequest is a request to a cloud's path as it arrived.
type HostedRequest struct {
	Path, Query string
	Header      http.Header
	Body        []byte
}

// RegisterServiceAccount lets the service account email, whose key's
// public half is key, obtain access tokens (behaviour b, valid for ttl; 0:
// an hour) with the jwt-bearer grant.
func (s *Simulator) RegisterServiceAccount(email string, key *rsa.PublicKey, b Behavior, ttl time.Duration) {
	s.cloud.register(&s.cloud.accounts, email, cloudPrincipal{key: key, b: b, ttl: ttl})
}

// RegisterClient lets the application clientID, authenticated by secret,
// obtain access tokens (behaviour b, valid for ttl; 0: an hour) with the
// client_credentials grant, as from Microsoft Entra ID.
func (s *Simulator) RegisterClient(clientID, secret string, b Behavior, ttl time.Duration) {
	s.cloud.register(&s.cloud.clients, clientID, cloudPrincipal{secret: secret, b: b, ttl: ttl})
}

func (cs *cloudState) register(m *map[string]cloudPrincipal, id string, p cloudPrincipal) {
	if p.ttl <= 0 {
		p.ttl = time.Hour
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if *m == nil {
		*m = map[string]cloudPrincipal{}
	}
	(*m)[id] = p
}

// CloudTokensIssued is how many access tokens the token endpoint issued
// for service accounts and applications.
func (s *Simulator) CloudTokensIssued() int {
	s.cloud.mu.Lock()
	defer s.cloud.mu.Unlock()
	return s.cloud.issued
}

// HostedRequests are the requests to the clouds' paths, oldest first.
func (s *Simulator) HostedRequests() []HostedRequest {
	s.cloud.mu.Lock()
	defer s.cloud.mu.Unlock()
	return slices.Clone(s.cloud.requests)
}

// cloudGrant serves a token request of the jwt-bearer or
// client_credentials grant; false for another grant.
func (s *Simulator) cloudGrant(w http.ResponseWriter, r *http.Request, params url.Values) bool {
	var p cloudPrincipal
	switch params.Get("grant_type") {
	case "urn:ietf:params:oauth:grant-type:jwt-bearer":
		var code string
		if p, code = s.cloud.assertion(params.Get("assertion"), r); code != "" {
			oauthError(w, http.StatusBadRequest, code)
			return true
		}
	case "client_credentials":
		s.cloud.mu.Lock()
		app, ok := s.cloud.clients[params.Get("client_id")]
		s.cloud.mu.Unlock()
		switch {
		case !ok || app.secret != params.Get("client_secret"):
			oauthError(w, http.StatusUnauthorized, "invalid_client") // Entra's AADSTS7000215
			return true
		case !strings.HasSuffix(params.Get("scope"), "/.default"):
			oauthError(w, http.StatusBadRequest, "invalid_scope")
			return true
		}
		p = app
	default:
		return false
	}
	access := "sim-cat-" + randomHex()
	s.cloud.mu.Lock()
	if s.cloud.access == nil {
		s.cloud.access = map[string]time.Time{}
	}
	s.cloud.access[access] = time.Now().Add(p.ttl)
	s.cloud.issued++
	s.cloud.mu.Unlock()
	s.SetKey(access, p.b)
	body, _ := json.Marshal(map[string]any{
		"access_token": access, "token_type": "Bearer", "expires_in": int64((p.ttl + time.Second - 1) / time.Second),
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
	return true
}

// assertion checks a service account's signed JWT as Google does: RS256,
// signed by the key registered for its issuer, for this token endpoint,
// asking for the cloud-platform scope, valid for at most an hour. It
// returns the account, or the OAuth error code that refuses it.
func (cs *cloudState) assertion(jwt string, r *http.Request) (cloudPrincipal, string) {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return cloudPrincipal{}, "invalid_grant"
	}
	enc := base64.RawURLEncoding
	var header struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss, Scope, Aud string
		Iat, Exp        int64
	}
	h, err1 := enc.DecodeString(parts[0])
	c, err2 := enc.DecodeString(parts[1])
	sig, err3 := enc.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(h, &header) != nil || json.Unmarshal(c, &claims) != nil || header.Alg != "RS256" {
		return cloudPrincipal{}, "invalid_grant"
	}
	cs.mu.Lock()
	sa, ok := cs.accounts[claims.Iss]
	cs.mu.Unlock()
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	aud, err := url.Parse(claims.Aud)
	switch {
	case !ok || sa.key == nil: // an unknown or deleted account
		return cloudPrincipal{}, "invalid_grant"
	case rsa.VerifyPKCS1v15(sa.key, crypto.SHA256, digest[:], sig) != nil: // "Invalid JWT Signature."
		return cloudPrincipal{}, "invalid_grant"
	case err != nil || aud.Host != r.Host || aud.Path != OAuthTokenPath:
		return cloudPrincipal{}, "invalid_grant"
	case claims.Exp <= claims.Iat || claims.Exp-claims.Iat > 3600:
		return cloudPrincipal{}, "invalid_grant"
	case !slices.Contains(strings.Fields(claims.Scope), CloudScope):
		return cloudPrincipal{}, "invalid_scope"
	}
	return sa, ""
}

// cloudToken reports whether token may call a cloud's path: one the token
// endpoint issued and that has not expired, or a key set with SetKey.
func (s *Simulator) cloudToken(token string) bool {
	s.cloud.mu.Lock()
	expires, issued := s.cloud.access[token]
	s.cloud.mu.Unlock()
	if issued {
		return time.Now().Before(expires)
	}
	s.keysMu.RLock()
	_, listed := s.keys[token]
	s.keysMu.RUnlock()
	return listed
}

// serveHosted serves a request to a cloud's path; false for another path.
func (s *Simulator) serveHosted(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case strings.HasPrefix(r.URL.Path, "/openai/deployments/"):
		s.serveAzure(w, r)
	case strings.HasPrefix(r.URL.Path, "/v1/projects/"):
		s.serveVertex(w, r)
	case strings.HasPrefix(r.URL.Path, codeAssistPrefix):
		s.serveCodeAssist(w, r)
	default:
		return false
	}
	return true
}

// hostedBody reads and records a cloud request; nil when the client left.
func (s *Simulator) hostedBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := readBody(w, r)
	if err != nil {
		return nil, false
	}
	s.cloud.mu.Lock()
	s.cloud.requests = append(s.cloud.requests, HostedRequest{Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	s.cloud.mu.Unlock()
	return body, true
}

// native serves r, rewritten to the provider's path and body, as the
// provider's API.
func (s *Simulator) native(w http.ResponseWriter, r *http.Request, path, query string, body []byte) {
	r.URL.Path, r.URL.RawPath, r.URL.RawQuery = path, "", query
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	s.ServeHTTP(w, r)
}

// bearer is the token of an Authorization: Bearer header.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "Bearer ") {
		return ""
	}
	return strings.TrimSpace(h[7:])
}

// serveVertex serves a Vertex AI model path.
func (s *Simulator) serveVertex(w http.ResponseWriter, r *http.Request) {
	body, ok := s.hostedBody(w, r)
	if !ok {
		return
	}
	segs := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	googleFail := func(status int, gstatus, msg string) {
		b := googleError(status, gstatus, msg, "")
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(status)
		w.Write(b)
	}
	if r.Method != http.MethodPost || len(segs) != 8 || segs[0] != "projects" || segs[2] != "locations" || segs[4] != "publishers" || segs[6] != "models" ||
		segs[1] == "" || segs[3] == "" {
		googleFail(http.StatusNotFound, "NOT_FOUND", "The requested URL "+r.URL.Path+" was not found on this server.")
		return
	}
	publisher := segs[5]
	model, method, _ := strings.Cut(segs[7], ":")
	token := bearer(r)
	switch {
	case token == "":
		googleFail(http.StatusUnauthorized, "UNAUTHENTICATED", "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
		return
	case !s.cloudToken(token):
		googleFail(http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
		return
	}
	r.Header.Del("Authorization")
	switch {
	case publisher == "google" && (method == "generateContent" || method == "streamGenerateContent" || method == "countTokens"):
		r.Header.Set("X-Goog-Api-Key", token)
		s.native(w, r, "/v1beta/models/"+model+":"+method, r.URL.RawQuery, body)
	case publisher == "anthropic" && (method == "rawPredict" || method == "streamRawPredict"):
		var fields map[string]json.RawMessage
		invalid := func(msg string) {
			b := anthropicError("invalid_request_error", msg, "req_vrtx_"+randomHex()[:12])
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write(b)
		}
		switch {
		case json.Unmarshal(body, &fields) != nil:
			invalid("invalid JSON body")
			return
		case fields["model"] != nil:
			invalid("model: Extra inputs are not permitted")
			return
		case string(fields["anthropic_version"]) != `"`+VertexAnthropicVersion+`"`:
			invalid("anthropic_version: Input should be '" + VertexAnthropicVersion + "'")
			return
		case (method == "streamRawPredict") != (string(fields["stream"]) == "true"):
			invalid("stream: streamRawPredict takes \"stream\": true, rawPredict does not")
			return
		}
		delete(fields, "anthropic_version")
		fields["model"], _ = json.Marshal(model)
		native, _ := json.Marshal(fields)
		r.Header.Set("X-Api-Key", token)
		r.Header.Set("Anthropic-Version", "2023-06-01")
		s.native(w, r, "/v1/messages", "", native)
	default:
		googleFail(http.StatusNotFound, "NOT_FOUND", "Publisher Model `projects/"+segs[1]+"/locations/"+segs[3]+"/publishers/"+publisher+"/models/"+model+"` not found.")
	}
}
