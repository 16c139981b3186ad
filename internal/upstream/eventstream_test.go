package upstream

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// Golden messages, their CRCs computed apart from Go (Python's zlib.crc32):
// a Bedrock chunk (whose payload is the message_stop event with Bedrock's
// invocation metrics, in base64, beside another member), a throttling
// exception, and the empty message of AWS's own test vectors.
const (
	goldenChunk    = "000000fa0000004b86a80f8d0b3a6576656e742d747970650700056368756e6b0d3a636f6e74656e742d747970650700106170706c69636174696f6e2f6a736f6e0d3a6d6573736167652d747970650700056576656e747b226279746573223a2265794a306558426c496a6f696257567a6332466e5a56397a644739774969776959573168656d39754c574a6c5a484a76593273746157353262324e6864476c76626b316c64484a7059334d694f6e736961573577645852556232746c626b4e7664573530496a6f784d6977696233563063485630564739725a57354462335675644349364d333139222c2270223a2261626364227dba7489ac"
	goldenThrottle = "000000b2000000613590d5d30f3a657863657074696f6e2d747970650700137468726f74746c696e67457863657074696f6e0d3a636f6e74656e742d747970650700106170706c69636174696f6e2f6a736f6e0d3a6d6573736167652d74797065070009657863657074696f6e7b226d657373616765223a22546f6f206d616e792072657175657374732c20706c656173652077616974206265666f726520747279696e6720616761696e2e227de8ffb26a"
	goldenEmpty    = "000000100000000005c248eb7d98c8ff"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// esHeader is a header to encode: a string unless typ says otherwise.
type esHeader struct {
	name  string
	typ   byte
	value []byte // as on the wire, after the type (with its length for types 6 and 7)
}

func stringHeader(name, value string) esHeader {
	v := binary.BigEndian.AppendUint16(nil, uint16(len(value)))
	return esHeader{name, 7, append(v, value...)}
}

// encodeES encodes a message, as the tests' own encoder (the simulator has
// its own, which the tests through the server check against the decoder).
func encodeES(headers []esHeader, payload []byte) []byte {
	var h []byte
	for _, x := range headers {
		h = append(h, byte(len(x.name)))
		h = append(h, x.name...)
		h = append(h, x.typ)
		h = append(h, x.value...)
	}
	total := esOverhead + len(h) + len(payload)
	b := binary.BigEndian.AppendUint32(nil, uint32(total))
	b = binary.BigEndian.AppendUint32(b, uint32(len(h)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(append(b, h...), payload...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func TestEventStreamGolden(t *testing.T) {
	stream := append(append(unhex(t, goldenChunk), unhex(t, goldenEmpty)...), unhex(t, goldenThrottle)...)
	// One byte per read: each message is returned whole however it arrives.
	d := newESDecoder(iotest.OneByteReader(bytes.NewReader(stream)))
	m, err := d.Next()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"} {
		if v, ok := m.Header(name); !ok || string(v) != want {
			t.Errorf("header %s = %q, %v; want %q", name, v, ok, want)
		}
	}
	if _, ok := m.Header(":exception-type"); ok {
		t.Error("a header the message does not have was found")
	}
	if !strings.HasPrefix(string(m.Payload), `{"bytes":"eyJ0eXBlIjoibWVzc2FnZV9zdG9wIi`) || !strings.HasSuffix(string(m.Payload), `"p":"abcd"}`) {
		t.Errorf("payload = %s", m.Payload)
	}
	if m, err = d.Next(); err != nil || len(m.Payload) != 0 || len(m.headers) != 0 {
		t.Fatalf("empty message: %v, %+v", err, m)
	}
	if m, err = d.Next(); err != nil {
		t.Fatal(err)
	}
	if v, _ := m.Header(":exception-type"); string(v) != "throttlingException" {
		t.Errorf("exception type = %q", v)
	}
	if _, err = d.Next(); err != io.EOF {
		t.Errorf("after the last message: %v, want io.EOF", err)
	}
}

func TestEventStreamHeaderTypes(t *testing.T) {
	// Every value type, so that the string header after them is found.
	headers := []esHeader{
		{"t", 0, nil}, {"f", 1, nil}, {"byte", 2, []byte{7}}, {"short", 3, []byte{0, 1}},
		{"int", 4, []byte{0, 0, 0, 1}}, {"long", 5, make([]byte, 8)}, {"bytes", 6, []byte{0, 2, 'h', 'i'}},
		{"ts", 8, make([]byte, 8)}, {"uuid", 9, make([]byte, 16)}, stringHeader(":message-type", "event"),
	}
	m, err := newESDecoder(bytes.NewReader(encodeES(headers, []byte("x")))).Next()
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := m.Header(":message-type"); !ok || string(v) != "event" {
		t.Errorf(":message-type = %q, %v", v, ok)
	}
	if v, ok := m.Header("bytes"); !ok || string(v) != "hi" {
		t.Errorf("bytes = %q, %v", v, ok)
	}
	if _, ok := m.Header("int"); ok {
		t.Error("an int header was returned as a string")
	}
}

func TestEventStreamCorrupt(t *testing.T) {
	good := unhex(t, goldenChunk)
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		return b
	}
	huge := binary.BigEndian.AppendUint32(nil, maxEventStreamMessage+1)
	huge = binary.BigEndian.AppendUint32(huge, 0)
	huge = binary.BigEndian.AppendUint32(huge, crc32.ChecksumIEEE(huge))
	short := binary.BigEndian.AppendUint32(nil, 15)
	short = binary.BigEndian.AppendUint32(short, 0)
	short = binary.BigEndian.AppendUint32(short, crc32.ChecksumIEEE(short))
	unknownType := encodeES([]esHeader{{"x", 10, nil}}, nil)
	for name, tc := range map[string]struct {
		stream []byte
		want   error
	}{
		"prelude CRC":      {flip(9), errEventStreamChecksum},
		"length":           {flip(3), errEventStreamChecksum}, // the prelude CRC covers the lengths
		"payload":          {flip(200), errEventStreamChecksum},
		"message CRC":      {flip(len(good) - 1), errEventStreamChecksum},
		"too large":        {huge, errEventStreamTooLarge},
		"shorter than 16":  {short, errEventStreamMalformed},
		"unknown type":     {unknownType, errEventStreamMalformed},
		"cut in a message": {good[:100], io.ErrUnexpectedEOF},
		"cut in a prelude": {good[:5], io.ErrUnexpectedEOF},
		"nothing":          {nil, io.EOF},
	} {
		d := newESDecoder(bytes.NewReader(tc.stream))
		if _, err := d.Next(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
		if _, err := d.Next(); !errors.Is(err, tc.want) {
			t.Errorf("%s: the error is not sticky: %v", name, err)
		}
	}
}

func TestEventStreamBuffered(t *testing.T) {
	two := append(unhex(t, goldenEmpty), unhex(t, goldenThrottle)...)
	r, w := io.Pipe()
	d := newESDecoder(r)
	go func() { w.Write(two[:20]) }() // the first message and part of the second
	if _, err := d.Next(); err != nil {
		t.Fatal(err)
	}
	if d.Buffered() {
		t.Error("Buffered with half a message")
	}
	go func() { w.Write(two[20:]); w.Close() }()
	if _, err := d.Next(); err != nil {
		t.Fatal(err)
	}
}

// FuzzEventStream: random bytes never panic nor yield a message that is not
// within them, and messages encoded from the fuzzer's parts decode to those
// parts, whichever way the stream is cut into reads.
func FuzzEventStream(f *testing.F) {
	f.Add([]byte("hello"), "chunk", []byte{})
	f.Add([]byte(`{"bytes":"e30="}`), ":event-type", []byte(goldenEmpty))
	f.Add([]byte{}, "", []byte{0, 0, 0, 16, 0, 0, 0, 0, 5, 194, 72, 235, 125, 152, 200, 255})
	f.Fuzz(func(t *testing.T, payload []byte, header string, random []byte) {
		d := newESDecoder(iotest.HalfReader(bytes.NewReader(random)))
		for range 64 {
			m, err := d.Next()
			if err != nil {
				break
			}
			if len(m.Payload) > len(random) {
				t.Fatal("a payload longer than the input")
			}
			m.Header(":message-type")
		}
		if len(header) == 0 || len(header) > 255 {
			header = "h"
		}
		value := payload[:min(len(payload), 1<<10)] // a string header holds up to 64 KiB
		msg := encodeES([]esHeader{stringHeader(header, string(value)), {"b", 0, nil}}, payload)
		stream := append(bytes.Clone(msg), msg...)
		d = newESDecoder(iotest.OneByteReader(bytes.NewReader(stream)))
		for range 2 {
			m, err := d.Next()
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := m.Header(header); !bytes.Equal(m.Payload, payload) || !ok || !bytes.Equal(v, value) {
				t.Fatalf("round trip: payload %q header %q, want %q", m.Payload, v, payload)
			}
		}
		if _, err := d.Next(); err != io.EOF {
			t.Fatalf("after the messages: %v", err)
		}
	})
}
