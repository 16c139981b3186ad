// Package respcache is the exact-match response cache (docs/cache.md): the
// canonical key of a request, the entries a hit replays, the bounded
// memory backend and the single flight that coalesces identical misses.
package respcache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"

	"github.com/sluicehq/sluice"
)

// ignored are the body members, at the top level of every protocol's
// request, that do not change the answer: how it is delivered (stream,
// stream_options: the stream flag and include_usage are in the key apart,
// since they change the bytes the caller gets), who asks (user,
// safety_identifier, metadata, labels), and hints to the upstream's own
// storage and prompt cache (store, prompt_cache_key,
// prompt_cache_retention).
var ignored = []string{"stream", "stream_options", "user", "safety_identifier", "metadata", "labels", "store",
	"prompt_cache_key", "prompt_cache_retention"}

// Request is what identifies an answer, beside the body.
type Request struct {
	Tenant   string
	Alias    string
	Protocol sluice.Protocol
	// Stream and IncludeUsage are how the caller asked for the answer: a
	// stream and a whole answer are never served from each other, nor a
	// stream with its usage event from one without.
	Stream, IncludeUsage bool
	// Variant names what else changes the answer: a header such as
	// anthropic-beta ("" for none).
	Variant string
	Body    []byte
}

// ErrNotObject is Key's error for a body that is not a JSON object.
var ErrNotObject = errors.New("respcache: the body is not a JSON object")

// Key returns the hex SHA-256 of r in canonical form — its body with the
// ignored members removed and every object's members sorted, strings and
// numbers kept as written — and whether the request is deterministic: its
// temperature (Gemini: generationConfig.temperature) is present and zero.
func Key(r *Request) (key string, deterministic bool, err error) {
	body := skipSpace(r.Body)
	if len(body) == 0 || body[0] != '{' {
		return "", false, ErrNotObject
	}
	var temperature, config []byte
	c := canon{out: make([]byte, 0, len(body)), top: func(name, value []byte) {
		switch string(name) {
		case "temperature":
			temperature = value
		case "generationConfig", "generation_config":
			config = value
		}
	}}
	rest, err := c.value(body, 0)
	if err != nil || len(skipSpace(rest)) > 0 {
		return "", false, errSyntax
	}
	if temperature == nil {
		temperature = memberOf(config, "temperature")
	}
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, part := range []string{r.Tenant, r.Alias, string(r.Protocol), r.Variant} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(part)))]) // length-prefixed: no two tuples hash alike
		h.Write([]byte(part))
	}
	h.Write([]byte{flag(r.Stream), flag(r.IncludeUsage)})
	h.Write(c.out)
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])), isZero(temperature), nil
}

func flag(b bool) byte {
	if b {
		return 1
	}
	return 0
}
