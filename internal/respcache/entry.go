package respcache

import (
	"encoding/binary"
	"errors"

	"github.com/sluicehq/sluice"
)

// Entry is an answer as its caller received it, and what it cost: a hit
// replays Chunks in order, flushing after each, so a stream keeps its
// original chunking.
type Entry struct {
	ContentType string
	Chunks      [][]byte
	Usage       sluice.Usage // what the original answer used upstream
	Model       string       // the upstream model that answered, for what a hit saves
	// Dropped and DroppedTools are what the original answer said its
	// translation left out (X-Sluice-Dropped, X-Sluice-Dropped-Tools; ""
	// for nothing), for a replay to say it too.
	Dropped, DroppedTools string
}

// Size is the bytes of the answer's body.
func (e *Entry) Size() int {
	n := 0
	for _, c := range e.Chunks {
		n += len(c)
	}
	return n
}

// entryVersion leads an encoded entry, so that a later layout can tell
// one it cannot read (and treat it as a miss).
const entryVersion = 2

// Encode is e in the compact form the Redis backend stores.
func (e *Entry) Encode() []byte {
	b := make([]byte, 0, e.Size()+len(e.ContentType)+len(e.Model)+len(e.Dropped)+len(e.DroppedTools)+16+binary.MaxVarintLen64*(10+len(e.Chunks)))
	b = append(b, entryVersion)
	for _, s := range []string{e.ContentType, e.Model, e.Dropped, e.DroppedTools} {
		b = appendBytes(b, []byte(s))
	}
	u := &e.Usage
	for _, n := range []int64{u.PromptTokens, u.CompletionTokens, u.CachedTokens, u.CacheWriteTokens, u.ReasoningTokens, u.TotalTokens} {
		b = binary.AppendVarint(b, n)
	}
	measured := byte(0)
	if u.Measured {
		measured = 1
	}
	b = append(b, measured)
	b = binary.AppendUvarint(b, uint64(len(e.Chunks)))
	for _, c := range e.Chunks {
		b = appendBytes(b, c)
	}
	return b
}

func appendBytes(b, v []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

var errCorrupt = errors.New("respcache: corrupt entry")

// Decode reads an entry Encode made. Its chunks share b.
func Decode(b []byte) (*Entry, error) {
	if len(b) == 0 || b[0] != entryVersion {
		return nil, errCorrupt
	}
	d := decoder{b: b[1:]}
	e := &Entry{ContentType: string(d.bytes()), Model: string(d.bytes()), Dropped: string(d.bytes()), DroppedTools: string(d.bytes())}
	u := &e.Usage
	for _, n := range []*int64{&u.PromptTokens, &u.CompletionTokens, &u.CachedTokens, &u.CacheWriteTokens, &u.ReasoningTokens, &u.TotalTokens} {
		*n = d.varint()
	}
	u.Measured = d.byte() == 1
	n := d.uvarint()
	if n > uint64(len(d.b)) { // every chunk takes a byte at least
		return nil, errCorrupt
	}
	e.Chunks = make([][]byte, 0, n)
	for range n {
		e.Chunks = append(e.Chunks, d.bytes())
	}
	if d.bad || len(d.b) > 0 {
		return nil, errCorrupt
	}
	return e, nil
}

type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.bad = true
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.bad, d.b = true, nil
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}
