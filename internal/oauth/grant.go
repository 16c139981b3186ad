package oauth

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/config"
)

// The grants (config.OAuth.Grant) differ only in what a token request
// says and what seeds the credential's row (config.OAuth.Seed): the
// refresh token of the operator's file, which the token endpoint may
// rotate (the row then keeps the new one), sent with a client secret
// when the catalog names one (Google's endpoint wants Gemini CLI's); a
// client secret (client_credentials, RFC 6749 §4.4: Microsoft Entra ID
// for Azure OpenAI); or a service account's private key, which signs a
// new assertion for each token (jwt_bearer, RFC 7523: Google for Vertex
// AI).
// Everything else is shared: one token per credential for every replica,
// refreshed before expiry under the row's lock, and a grant the token
// endpoint refuses disables the credential until its seed changes.

// jwtBearer is RFC 7523's grant type.
const jwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// assertionLifetime is how long a signed assertion is valid: Google's
// maximum.
const assertionLifetime = time.Hour

// tokenRequest is the token request of the spec's grant.
func (m *Manager) tokenRequest(sp *Spec, refreshToken string) (url.Values, error) {
	var params url.Values
	switch sp.GrantType() {
	case config.GrantClientCredentials:
		secret, err := sp.ClientSecret(m.o.LookupEnv)
		if err != nil {
			return nil, err
		}
		params = url.Values{"grant_type": {"client_credentials"}, "client_id": {sp.ClientID}, "client_secret": {secret}}
	case config.GrantJWTBearer:
		sa, err := sp.ServiceAccount()
		if err != nil {
			return nil, err
		}
		assertion, err := signAssertion(sa, sp.TokenEndpoint(), sp.Scopes, m.o.Now())
		if err != nil {
			return nil, err
		}
		// The scopes are the assertion's claim, not a parameter.
		return url.Values{"grant_type": {jwtBearer}, "assertion": {assertion}}, nil
	default:
		params = url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}, "client_id": {sp.ClientID}}
		if sp.HasClientSecret() {
			secret, err := sp.ClientSecret(m.o.LookupEnv)
			if err != nil {
				return nil, err
			}
			params.Set("client_secret", secret)
		}
	}
	if len(sp.Scopes) > 0 {
		params.Set("scope", strings.Join(sp.Scopes, " "))
	}
	return params, nil
}

// refused reports whether the OAuth error code code means that the token
// endpoint refuses the credential's grant itself, which only a new seed
// mends: invalid_grant (a refresh token spent or revoked, an assertion
// whose key was deleted), or, for the grant whose seed is the client
// secret, invalid_client (a client secret expired or wrong). A
// refresh_token grant's client secret is not its seed: a wrong one is
// retried, and mended by writing the right one, without a new refresh
// token.
func refused(sp *Spec, code string) bool {
	return code == "invalid_grant" || code == "invalid_client" && sp.GrantType() == config.GrantClientCredentials
}

// storedSeed is what a new row keeps as its refresh token: the seed of the
// refresh_token grant; nothing for the others, whose secret stays in the
// operator's file or variable and is read for each request.
func storedSeed(sp *Spec, seed string) string {
	if sp.GrantType() == config.GrantRefreshToken {
		return seed
	}
	return ""
}

// seedMaterial is what a seed's hash is taken of: the refresh token alone
// (as rows seeded before there were other grants were hashed, so they are
// not reseeded), else the grant and its secret, so a credential whose grant
// changes starts afresh.
func seedMaterial(sp *Spec, seed string) string {
	if sp.GrantType() == config.GrantRefreshToken {
		return seed
	}
	return sp.GrantType() + "\x00" + seed
}

// signAssertion signs a JWT (RS256) with which service account sa asks
// the token endpoint aud for an access token of scopes, as Google's
// service-account flow wants it: issued by the account's client_email,
// for an hour from now, and named by its private_key_id.
func signAssertion(sa *config.ServiceAccount, aud string, scopes []string, now time.Time) (string, error) {
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": sa.PrivateKeyID})
	claims, _ := json.Marshal(map[string]any{
		"iss": sa.ClientEmail, "scope": strings.Join(scopes, " "), "aud": aud,
		"iat": now.Unix(), "exp": now.Add(assertionLifetime).Unix(),
	})
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(nil, sa.Key, crypto.SHA256, digest[:])
	if err != nil {
		return "", err
	}
	return signed + "." + enc.EncodeToString(sig), nil
}
