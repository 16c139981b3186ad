package config

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
)

// OAuth grants (OAuth.Grant).
const (
	GrantRefreshToken      = "refresh_token"
	GrantClientCredentials = "client_credentials"
	GrantJWTBearer         = "jwt_bearer"
)

// GrantType is the grant of the oauth block: Grant, refresh_token when
// unset.
func (o *OAuth) GrantType() string {
	if o.Grant == "" {
		return GrantRefreshToken
	}
	return o.Grant
}

// Seed returns what the credential's tokens are obtained with: the refresh
// token of its file, the client secret, or the service account's private
// key. A new seed (the operator wrote another) replaces the tokens held.
// Errors name the variable or file, never its content.
func (o *OAuth) Seed(lookupEnv func(string) (string, bool)) (string, error) {
	switch o.GrantType() {
	case GrantClientCredentials:
		return o.ClientSecret(lookupEnv)
	case GrantJWTBearer:
		sa, err := o.ServiceAccount()
		if err != nil {
			return "", err
		}
		return sa.PrivateKeyPEM, nil
	}
	return o.RefreshToken()
}

// HasClientSecret reports whether the oauth block names a client secret:
// grant client_credentials requires one; grant refresh_token sends one when
// named, for a token endpoint that authenticates its client even when it
// refreshes (Google's, for an installed application such as Gemini CLI).
func (o *OAuth) HasClientSecret() bool {
	return o.ClientSecretEnv != "" || o.ClientSecretFile != ""
}

// ClientSecret returns the client secret of client_secret_env or
// client_secret_file.
func (o *OAuth) ClientSecret(lookupEnv func(string) (string, bool)) (string, error) {
	switch {
	case o.ClientSecretEnv != "" && o.ClientSecretFile != "":
		return "", &fieldError{msg: "set only one of client_secret_env and client_secret_file"}
	case o.ClientSecretEnv != "":
		return readEnv("client_secret_env", o.ClientSecretEnv, lookupEnv)
	case o.ClientSecretFile != "":
		return readSecretFile("client_secret_file", o.ClientSecretFile)
	}
	return "", &fieldError{field: "client_secret_env", msg: "required (or client_secret_file) for grant client_credentials"}
}

// ServiceAccount is a Google service account's JSON key as grant
// jwt_bearer uses it.
type ServiceAccount struct {
	ClientEmail   string
	PrivateKeyID  string
	TokenURI      string
	Key           *rsa.PrivateKey
	PrivateKeyPEM string
}

// ServiceAccount reads service_account_file. Errors name the file and the
// member at fault, never a key.
func (o *OAuth) ServiceAccount() (*ServiceAccount, error) {
	raw, err := readSecretFile("service_account_file", o.ServiceAccountFile)
	if err != nil {
		return nil, err
	}
	var f struct {
		Type         string `json:"type"`
		ClientEmail  string `json:"client_email"`
		PrivateKeyID string `json:"private_key_id"`
		PrivateKey   string `json:"private_key"`
		TokenURI     string `json:"token_uri"`
	}
	bad := func(msg string) error {
		return &fieldError{field: "service_account_file", msg: fmt.Sprintf("%s: %s", o.ServiceAccountFile, msg)}
	}
	if json.Unmarshal([]byte(raw), &f) != nil {
		return nil, bad("not a JSON service account key")
	}
	switch {
	case f.Type != "service_account":
		return nil, bad(`"type" is not service_account`)
	case f.ClientEmail == "":
		return nil, bad(`"client_email" is missing`)
	}
	block, _ := pem.Decode([]byte(f.PrivateKey))
	if block == nil {
		return nil, bad(`"private_key" is not a PEM key`)
	}
	var key *rsa.PrivateKey
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		key, _ = k.(*rsa.PrivateKey)
	} else if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		key = k
	}
	if key == nil {
		return nil, bad(`"private_key" is not an RSA private key`)
	}
	return &ServiceAccount{ClientEmail: f.ClientEmail, PrivateKeyID: f.PrivateKeyID, TokenURI: f.TokenURI, Key: key, PrivateKeyPEM: f.PrivateKey}, nil
}

// TokenEndpoint is where tokens are asked for: token_url, else the service
// account's token_uri for grant jwt_bearer.
func (o *OAuth) TokenEndpoint() string {
	if o.TokenURL == "" && o.GrantType() == GrantJWTBearer {
		if sa, err := o.ServiceAccount(); err == nil {
			return sa.TokenURI
		}
	}
	return o.TokenURL
}

// oauthGrant checks what the oauth block's grant needs, and that it sets
// nothing another grant reads; it returns the token URL to check, ok
// false when it cannot be known.
func (v *validator) oauthGrant(at string, o *OAuth) (tokenURL string, ok bool) {
	notFor := func(field string, set bool) {
		if set {
			v.addf(at+"."+field, "not used by grant %s", o.GrantType())
		}
	}
	switch o.GrantType() {
	case GrantRefreshToken:
		if o.ClientID == "" {
			v.addf(at+".client_id", "required")
		}
		if o.RefreshTokenFile == "" {
			v.addf(at+".refresh_token_file", "required")
		} else if _, err := o.RefreshToken(); err != nil {
			v.secret(at, err)
		}
		if o.HasClientSecret() {
			if _, err := o.ClientSecret(v.lookupEnv); err != nil {
				v.secret(at, err)
			}
		}
		notFor("service_account_file", o.ServiceAccountFile != "")
	case GrantClientCredentials:
		if o.ClientID == "" {
			v.addf(at+".client_id", "required")
		}
		if _, err := o.ClientSecret(v.lookupEnv); err != nil {
			v.secret(at, err)
		}
		notFor("refresh_token_file", o.RefreshTokenFile != "")
		notFor("service_account_file", o.ServiceAccountFile != "")
	case GrantJWTBearer:
		if o.ServiceAccountFile == "" {
			v.addf(at+".service_account_file", "required for grant jwt_bearer")
		} else if _, err := o.ServiceAccount(); err != nil {
			v.secret(at, err)
			return o.TokenURL, o.TokenURL != "" // the file's token_uri is unknown
		}
		if len(o.Scopes) == 0 {
			v.addf(at+".scopes", "required for grant jwt_bearer (Vertex AI: https://www.googleapis.com/auth/cloud-platform)")
		}
		notFor("client_id", o.ClientID != "")
		notFor("refresh_token_file", o.RefreshTokenFile != "")
		notFor("client_secret_env", o.HasClientSecret())
	default:
		v.addf(at+".grant", "must be refresh_token, client_credentials or jwt_bearer")
		return o.TokenURL, true
	}
	return o.TokenEndpoint(), true
}
