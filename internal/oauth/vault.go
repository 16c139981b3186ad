package oauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/config"
)

// vault seals the tokens stored in the database and hashes the refresh
// token of the operator's file, under the operator's key.
type vault struct {
	aead    cipher.AEAD
	hashKey []byte // HMAC key of seed hashes, derived from the key
}

func newVault(key []byte) (vault, error) {
	if len(key) != config.SecretKeySize {
		return vault{}, fmt.Errorf("oauth: the secret key must be %d bytes, got %d", config.SecretKeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return vault{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return vault{}, err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("sluice oauth seed hash"))
	return vault{aead: aead, hashKey: mac.Sum(nil)}, nil
}

// seal encrypts a token of the credential id's column: the nonce, then the
// ciphertext. The additional data binds it to its row and column, so a
// sealed value copied elsewhere does not open.
func (v vault) seal(id, column, token string) []byte {
	nonce := make([]byte, v.aead.NonceSize(), v.aead.NonceSize()+len(token)+v.aead.Overhead())
	rand.Read(nonce)
	return v.aead.Seal(nonce, nonce, []byte(token), []byte(id+"\x00"+column))
}

// errUnsealable is a stored token that does not open under the key: the
// key changed, or the row was tampered with.
var errUnsealable = errors.New("a stored token does not decrypt with server.secret_key (was the key changed?)")

// open decrypts what seal made.
func (v vault) open(id, column string, sealed []byte) (string, error) {
	n := v.aead.NonceSize()
	if len(sealed) < n {
		return "", errUnsealable
	}
	plain, err := v.aead.Open(nil, sealed[:n], sealed[n:], []byte(id+"\x00"+column))
	if err != nil {
		return "", errUnsealable
	}
	return string(plain), nil
}

// seedHash identifies a refresh token of the operator's file without
// revealing it: keyed, so the database alone cannot confirm a guess.
func (v vault) seedHash(refreshToken string) string {
	mac := hmac.New(sha256.New, v.hashKey)
	mac.Write([]byte(refreshToken))
	return hex.EncodeToString(mac.Sum(nil))
}
