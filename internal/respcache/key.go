// Package respcache is the exact-match response cache (docs/cache.md): the
// canonical key of a request, the entries a hit replays, the bounded
// memory backend and the single flight that coalesces identical misses.
package respcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"

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
// ignored members removed and every object's members sorted, numbers
// kept as written — and whether the request is deterministic: its
// temperature (Gemini: generationConfig.temperature) is present and zero.
func Key(r *Request) (key string, deterministic bool, err error) {
	d := json.NewDecoder(bytes.NewReader(r.Body))
	d.UseNumber()
	var body map[string]any
	if err := d.Decode(&body); err != nil || body == nil {
		return "", false, ErrNotObject
	}
	for _, name := range ignored {
		delete(body, name)
	}
	canonical, err := json.Marshal(body) // a map's members are marshalled sorted, recursively
	if err != nil {
		return "", false, err
	}
	h := sha256.New()
	for _, part := range []string{r.Tenant, r.Alias, string(r.Protocol), strconv.FormatBool(r.Stream), strconv.FormatBool(r.IncludeUsage), r.Variant} {
		h.Write(strconv.AppendInt(nil, int64(len(part)), 10)) // length-prefixed: no two tuples hash alike
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil)), zeroTemperature(body), nil
}

// zeroTemperature reports whether body asks for temperature 0: at its top
// level, or in Gemini's generation config (either spelling).
func zeroTemperature(body map[string]any) bool {
	t, ok := body["temperature"]
	if !ok {
		for _, name := range []string{"generationConfig", "generation_config"} {
			if gc, isObj := body[name].(map[string]any); isObj {
				if t, ok = gc["temperature"]; ok {
					break
				}
			}
		}
	}
	n, isNum := t.(json.Number)
	if !ok || !isNum {
		return false
	}
	f, err := n.Float64()
	return err == nil && f == 0
}
