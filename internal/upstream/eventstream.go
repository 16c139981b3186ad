package upstream

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
)

// The AWS event stream (application/vnd.amazon.eventstream) frames the
// streamed answers of AWS services, Bedrock's among them, as binary
// messages, each:
//
//	total length (4, big endian, the whole message) | headers length (4) |
//	prelude CRC32 (4, of the 8 bytes before) | headers | payload |
//	message CRC32 (4, of every byte before it)
//
// and each header: name length (1) | name | value type (1) | value, whose
// size the type gives (a 2-byte length before byte arrays and strings).
const (
	esPreludeSize = 12
	esOverhead    = esPreludeSize + 4 // the prelude and the message CRC
	// maxEventStreamMessage and maxEventStreamHeaders are the format's own
	// bounds: a longer message is refused before it is read, so a stream
	// cannot make Sluice hold more than this per message.
	maxEventStreamMessage = 16 << 20
	maxEventStreamHeaders = 128 << 10
	esInitialBuffer       = 4 << 10 // a few dozen of Bedrock's chunk messages
)

// Event stream decoding errors: each ends the stream.
var (
	errEventStreamChecksum  = errors.New("event stream: checksum mismatch")
	errEventStreamMalformed = errors.New("event stream: malformed message")
	errEventStreamTooLarge  = errors.New("event stream: message larger than the format allows")
)

// esHeaderValueSize is the size of a header value of each type, -1 for the
// types whose value is a 2-byte length and as many bytes (byte array 6,
// string 7). Types: bool true 0, bool false 1, byte 2, short 3, int 4,
// long 5, timestamp 8, UUID 9.
var esHeaderValueSize = [...]int{0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 6: -1, 7: -1, 8: 8, 9: 16}

// esMessage is one decoded message. Its slices point into the decoder's
// buffer and are valid until the decoder's next Next.
type esMessage struct {
	headers []byte // checked: every header is whole
	Payload []byte
}

// Header returns the value of the string or byte-array header name; ok is
// false when the message has none of that name and type.
func (m esMessage) Header(name string) (value []byte, ok bool) {
	for h := m.headers; len(h) > 0; {
		n := int(h[0])
		key, typ := h[1:1+n], h[1+n]
		h = h[2+n:]
		size := esHeaderValueSize[typ]
		if size < 0 {
			size = int(binary.BigEndian.Uint16(h))
			if string(key) == name {
				return h[2 : 2+size], true
			}
			size += 2
		}
		h = h[size:]
	}
	return nil, false
}

// esDecoder reads the messages of an event stream one at a time, as they
// arrive: a message is returned as soon as its last byte is read. It reuses
// one buffer, grown to the largest message seen. Not safe for concurrent use.
type esDecoder struct {
	r          io.Reader
	buf        []byte // buf[start:end] is read and not yet returned
	start, end int
	err        error // sticky: the read error, or the stream's corruption
}

func newESDecoder(r io.Reader) *esDecoder {
	return &esDecoder{r: r, buf: make([]byte, esInitialBuffer)}
}

// Next returns the next message. At the end of the stream it returns io.EOF,
// or io.ErrUnexpectedEOF when the stream ends inside a message; a message
// that is corrupt or too large is an error, and so is everything after it.
func (d *esDecoder) Next() (esMessage, error) {
	for {
		m, need, err := d.parse()
		switch {
		case err != nil:
			d.err = err
			return esMessage{}, err
		case need == 0:
			return m, nil
		case d.err != nil:
			if d.err == io.EOF && d.end > d.start {
				return esMessage{}, io.ErrUnexpectedEOF
			}
			return esMessage{}, d.err
		}
		d.fill(need)
	}
}

// Buffered reports whether a whole message is buffered: Next would return
// it without reading.
func (d *esDecoder) Buffered() bool {
	_, need, err := d.peek()
	return err == nil && need == 0
}

// peek looks at the message at the head of the buffer: the bytes it still
// needs in all (0 when it is whole), or why it is corrupt. The prelude is
// checked before the rest is waited for, so a corrupt length is caught at
// once.
func (d *esDecoder) peek() (total, need int, err error) {
	b := d.buf[d.start:d.end]
	if len(b) < esPreludeSize {
		return 0, esPreludeSize, nil
	}
	if crc32.ChecksumIEEE(b[:8]) != binary.BigEndian.Uint32(b[8:]) {
		return 0, 0, errEventStreamChecksum
	}
	size, headers := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	switch {
	case size > maxEventStreamMessage || headers > maxEventStreamHeaders:
		return 0, 0, errEventStreamTooLarge
	case size < esOverhead || headers > size-esOverhead:
		return 0, 0, errEventStreamMalformed
	case len(b) < int(size):
		return int(size), int(size), nil
	}
	return int(size), 0, nil
}

// parse returns the message at the head of the buffer and consumes it when
// it is whole (need 0); otherwise need is the bytes it needs in all.
func (d *esDecoder) parse() (m esMessage, need int, err error) {
	total, need, err := d.peek()
	if err != nil || need > 0 {
		return m, need, err
	}
	b := d.buf[d.start : d.start+total]
	if crc32.ChecksumIEEE(b[:total-4]) != binary.BigEndian.Uint32(b[total-4:]) {
		return m, 0, errEventStreamChecksum
	}
	headers := esPreludeSize + int(binary.BigEndian.Uint32(b[4:]))
	m = esMessage{headers: b[esPreludeSize:headers], Payload: b[headers : total-4]}
	if !validESHeaders(m.headers) {
		return esMessage{}, 0, errEventStreamMalformed
	}
	d.start += total
	if d.start == d.end {
		d.start, d.end = 0, 0
	}
	return m, 0, nil
}

// validESHeaders reports whether h is a sequence of whole headers of known
// types, each with a name.
func validESHeaders(h []byte) bool {
	for len(h) > 0 {
		n := int(h[0])
		if n == 0 || len(h) < 2+n {
			return false
		}
		typ := int(h[1+n])
		h = h[2+n:]
		if typ >= len(esHeaderValueSize) {
			return false
		}
		size := esHeaderValueSize[typ]
		if size < 0 {
			if len(h) < 2 {
				return false
			}
			size = 2 + int(binary.BigEndian.Uint16(h))
		}
		if len(h) < size {
			return false
		}
		h = h[size:]
	}
	return true
}

// fill reads at least once, with room for a message of need bytes at the
// head of the buffer: what is unreturned moves to the front, and the buffer
// grows (doubling) when it is too small.
func (d *esDecoder) fill(need int) {
	if d.start+need > len(d.buf) {
		if need > len(d.buf) {
			grown := make([]byte, max(need, 2*len(d.buf)))
			d.end = copy(grown, d.buf[d.start:d.end])
			d.buf = grown
		} else {
			d.end = copy(d.buf, d.buf[d.start:d.end])
		}
		d.start = 0
	}
	for empty := 0; ; empty++ {
		n, err := d.r.Read(d.buf[d.end:])
		d.end += n
		switch {
		case err != nil:
			d.err = err
			return
		case n > 0:
			return
		case empty == maxEmptyReads:
			d.err = io.ErrNoProgress
			return
		}
	}
}

// maxEmptyReads is how many reads that return nothing the decoder takes
// (as bufio) before it calls the reader broken.
const maxEmptyReads = 100
