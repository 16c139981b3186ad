package config

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// SecretKeySize is the size of server.secret_key: an AES-256 key.
const SecretKeySize = 32

// Header returns the credential's static headers under canonical names,
// nil when it has none. Validate has checked them.
func (c *Credential) Header() http.Header {
	if len(c.Headers) == 0 {
		return nil
	}
	h := make(http.Header, len(c.Headers))
	for name, value := range c.Headers {
		h[http.CanonicalHeaderKey(name)] = []string{value}
	}
	return h
}

// RefreshToken returns the refresh token in the oauth credential's
// refresh_token_file, surrounding whitespace trimmed. Errors name the file,
// never its content.
func (o *OAuth) RefreshToken() (string, error) {
	return readSecretFile("refresh_token_file", o.RefreshTokenFile)
}

// SecretKey returns the key of server.secret_key_env or secret_key_file,
// decoded from base64; nil when neither is set. Errors name the variable or
// file, never the value.
func (s *Server) SecretKey(lookupEnv func(string) (string, bool)) ([]byte, error) {
	var encoded string
	var err error
	switch {
	case s.SecretKeyEnv != "" && s.SecretKeyFile != "":
		return nil, &fieldError{field: "secret_key_env", msg: "set only one of secret_key_env and secret_key_file"}
	case s.SecretKeyEnv != "":
		encoded, err = readEnv("secret_key_env", s.SecretKeyEnv, lookupEnv)
	case s.SecretKeyFile != "":
		encoded, err = readSecretFile("secret_key_file", s.SecretKeyFile)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	encoded = strings.TrimSpace(encoded)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err := enc.DecodeString(encoded); err == nil && len(key) == SecretKeySize {
			return key, nil
		}
	}
	field := "secret_key_env"
	if s.SecretKeyFile != "" {
		field = "secret_key_file"
	}
	return nil, &fieldError{field: field, msg: fmt.Sprintf("must hold %d bytes in base64 (make one with: openssl rand -base64 32)", SecretKeySize)}
}

// ownedHeaders are the request headers a credential may not set: those
// that carry its secret (Sluice sets them from the secret or the token),
// the body's framing and encoding, what Sluice asks the answer to be (the
// stream parser reads it), and the hop-by-hop headers (RFC 9110 §7.6.1).
var ownedHeaders = map[string]bool{
	"Authorization": true, "X-Api-Key": true, "Api-Key": true, "Host": true,
	"Content-Length": true, "Content-Type": true, "Content-Encoding": true, "Transfer-Encoding": true,
	"Accept": true, "Accept-Encoding": true, "Expect": true,
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Upgrade": true,
}

// credentialSecret checks that exactly one of secret_env, secret_file and
// oauth says where the credential at path gets its secret, and that it can
// be read.
func (v *validator) credentialSecret(at string, cr *Credential) {
	if !cr.OAuth.Set() {
		if _, err := readSecret(cr.SecretEnv, cr.SecretFile, v.lookupEnv); err != nil {
			v.secret(at, err)
		}
		return
	}
	if cr.SecretEnv != "" || cr.SecretFile != "" {
		v.addf(at, "set only one of secret_env, secret_file and oauth")
	}
	o, at := &cr.OAuth, at+".oauth"
	tokenURL, known := v.oauthGrant(at, o)
	// The URL is not quoted back, as for base_url.
	switch u, err := url.Parse(tokenURL); {
	case !known:
	case tokenURL == "":
		v.addf(at+".token_url", "required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		v.addf(at+".token_url", "must be an absolute http:// or https:// URL")
	case u.User != nil:
		v.addf(at+".token_url", "must not contain user info")
	}
	if o.Body != "" && o.Body != OAuthBodyForm && o.Body != OAuthBodyJSON {
		v.addf(at+".body", "must be form or json")
	}
	for j, s := range o.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
			v.addf(fmt.Sprintf("%s.scopes[%d]", at, j), "must be one scope: not empty, no white space, quote or backslash")
		}
	}
}

// headers checks a credential's static headers. Messages name the header,
// never its value, which may be secret.
func (v *validator) headers(at string, headers map[string]string) {
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range headers {
			if !yield(name) {
				return
			}
		}
	})
	first := make(map[string]string, len(names)) // canonical → as written
	for _, name := range names {
		path := at + "." + name
		canonical := http.CanonicalHeaderKey(name)
		switch {
		case !validHeaderName(name):
			v.addf(fmt.Sprintf("%s[%q]", at, name), "not a valid header name")
			continue
		case ownedHeaders[canonical]:
			v.addf(path, "Sluice sets %s itself (or it would break the request); a credential may not", canonical)
			continue
		case first[canonical] != "":
			v.addf(path, "the same header as %s (header names ignore case)", first[canonical])
			continue
		}
		first[canonical] = name
		if msg := headerValueProblem(headers[name]); msg != "" {
			v.addf(path, "%s", msg)
		}
	}
}

// validHeaderName reports whether name is an HTTP field name: a token (RFC
// 9110 §5.6.2).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// headerValueProblem says what is wrong with a header value, "" when
// nothing: control characters (CR and LF above all: they would start another
// header) and surrounding white space, which HTTP strips, are refused.
func headerValueProblem(value string) string {
	if value == "" {
		return "value must not be empty"
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < ' ' && c != '\t' || c == 0x7f {
			return "value must not contain control characters (CR, LF, NUL, …)"
		}
	}
	if strings.TrimSpace(value) != value {
		return "value must not start or end with white space"
	}
	return ""
}

// secretKey checks server.secret_key_env and secret_key_file, and that a
// key is given when an oauth credential keeps its tokens in a database that
// outlives the process.
func (v *validator) secretKey() {
	key, err := v.c.Server.SecretKey(v.lookupEnv)
	if err != nil {
		v.secret("server", err)
		return
	}
	if key != nil {
		return
	}
	i := slices.IndexFunc(v.c.Credentials, func(cr Credential) bool { return cr.OAuth.Set() })
	d := v.c.Database
	if u, _, err := readURL(d.URL, d.URLEnv, d.URLFile, v.lookupEnv); i >= 0 && err == nil && durable(u) {
		v.addf("server.secret_key_env", "required (or server.secret_key_file): credentials[%d] is an oauth credential, whose tokens are kept in the database encrypted with this key", i)
	}
}

// durable reports whether the database at u outlives the process: every
// database but SQLite in memory (sqlite://:memory:, or mode=memory; see
// sqldb.Open).
func durable(u string) bool {
	rest, ok := strings.CutPrefix(u, "sqlite://")
	return !ok || !strings.Contains(rest, ":memory:") && !strings.Contains(rest, "mode=memory")
}
