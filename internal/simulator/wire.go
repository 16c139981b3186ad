package simulator

import (
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendString appends s as a JSON string. Hand-written because responses
// are built by appending, and encoding/json would allocate per call.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, `\ufffd`...)
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// splitmix64 is a tiny, good-enough mixer: it turns a seed into a stream of
// well-spread numbers without allocating a rand.Rand.
func splitmix64(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// FNV-1a, 64 bit, inlined so hashing a prompt allocates nothing.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvAdd(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// appendID appends n base62 characters that differ per request and per
// simulator; ids only need to look real and not repeat.
func (s *Simulator) appendID(b []byte, n int) []byte {
	x := s.nonce ^ s.seq.Add(1)*0x9e3779b97f4a7c15
	var r uint64
	for i := range n {
		if i%10 == 0 { // 10 base62 digits use 60 of the 64 bits
			r = splitmix64(&x)
		}
		b = append(b, base62[r%62])
		r /= 62
	}
	return b
}

// requestID returns a new x-request-id value.
func (s *Simulator) requestID() string {
	b := make([]byte, 0, 36)
	b = append(b, "req_"...)
	return string(s.appendID(b, 32))
}

// modelCreated is the "created" of every listed model; a fixed past time
// keeps the list deterministic.
var modelCreated = time.Date(2024, 7, 18, 0, 0, 0, 0, time.UTC).Unix()

func appendModel(b []byte, id string) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, id)
	b = append(b, `,"object":"model","created":`...)
	b = strconv.AppendInt(b, modelCreated, 10)
	return append(b, `,"owned_by":"system"}`...)
}

func renderModelList(models []string) []byte {
	b := append([]byte(nil), `{"object":"list","data":[`...)
	for i, m := range models {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendModel(b, m)
	}
	return append(b, "]}"...)
}

// models answers GET /v1/models.
func (c *call) models() {
	c.respond(http.StatusOK, "application/json", c.sim.modelList)
}

// model answers GET /v1/models/{model}.
func (c *call) model(id string) {
	// With no Options.Models any model is served, so any model exists.
	if c.sim.modelSet == nil || c.sim.modelSet[id] {
		c.respond(http.StatusOK, "application/json", appendModel(nil, id))
		return
	}
	c.fail(http.StatusNotFound, modelNotFound(id))
}
