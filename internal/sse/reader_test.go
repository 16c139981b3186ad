package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"
)

// ev is an expected event. name and data are "" for a nil field; "=" prefixes a
// present one, so `data: "=x"` is Data "x" and `"="` is empty, non-nil Data.
type ev struct{ raw, name, data string }

func (e ev) String() string {
	return fmt.Sprintf("{raw %q name %s data %s}", e.raw, field(e.name), field(e.data))
}

func field(s string) string {
	if s == "" {
		return "nil"
	}
	return strconv.Quote(s[1:])
}

func got(e Event) ev {
	opt := func(b []byte) string {
		if b == nil {
			return ""
		}
		return "=" + string(b)
	}
	return ev{raw: string(e.Raw), name: opt(e.Name), data: opt(e.Data)}
}

// readAll returns the events of r, up to its first error.
func readAll(r *Reader) ([]ev, error) {
	var evs []ev
	for {
		e, err := r.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, got(e))
	}
}

var readerTests = []struct {
	name    string
	give    string
	want    []ev
	wantErr error
}{
	{name: "Empty", give: "", wantErr: io.EOF},
	{name: "OnlyBlankLines", give: "\n\r\n\r", wantErr: io.EOF},
	{name: "Data", give: "data: x\n\n", want: []ev{{"data: x\n\n", "", "=x"}}, wantErr: io.EOF},
	{name: "DataNoSpace", give: "data:x\n\n", want: []ev{{"data:x\n\n", "", "=x"}}, wantErr: io.EOF},
	{name: "DataOneSpaceRemoved", give: "data:  x \n\n", want: []ev{{"data:  x \n\n", "", "= x "}}, wantErr: io.EOF},
	{name: "DataEmpty", give: "data:\n\n", want: []ev{{"data:\n\n", "", "="}}, wantErr: io.EOF},
	{name: "DataWithoutColon", give: "data\n\n", want: []ev{{"data\n\n", "", "="}}, wantErr: io.EOF},
	{name: "DataColonInValue", give: "data: {\"a\":1}\n\n", want: []ev{{"data: {\"a\":1}\n\n", "", `={"a":1}`}}, wantErr: io.EOF},
	{name: "MultiLineData", give: "data: a\ndata:\ndata: c\n\n", want: []ev{{"data: a\ndata:\ndata: c\n\n", "", "=a\n\nc"}}, wantErr: io.EOF},
	{name: "NamedEvent", give: "event: ping\ndata: {}\n\n", want: []ev{{"event: ping\ndata: {}\n\n", "=ping", "={}"}}, wantErr: io.EOF},
	{name: "LastNameWins", give: "event: a\nevent:b\ndata: x\n\n", want: []ev{{"event: a\nevent:b\ndata: x\n\n", "=b", "=x"}}, wantErr: io.EOF},
	{name: "NameOnly", give: "event: done\n\n", want: []ev{{"event: done\n\n", "=done", ""}}, wantErr: io.EOF},
	{name: "CRLF", give: "event: e\r\ndata: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n", want: []ev{
		{"event: e\r\ndata: a\r\ndata: b\r\n\r\n", "=e", "=a\nb"},
		{"data: c\r\n\r\n", "", "=c"},
	}, wantErr: io.EOF},
	{name: "CR", give: "data: a\rdata: b\r\rdata: c\r\r", want: []ev{
		{"data: a\rdata: b\r\r", "", "=a\nb"},
		{"data: c\r\r", "", "=c"},
	}, wantErr: io.EOF},
	{name: "MixedLineEndings", give: "data: a\rdata: b\r\ndata: c\n\r\n", want: []ev{
		{"data: a\rdata: b\r\ndata: c\n\r\n", "", "=a\nb\nc"},
	}, wantErr: io.EOF},
	{name: "CRBlankLineTakesItsLF", give: "data: a\r\r\ndata: b\n\n", want: []ev{
		{"data: a\r\r\n", "", "=a"},
		{"data: b\n\n", "", "=b"},
	}, wantErr: io.EOF},
	{name: "CommentOnly", give: ": ping\n\ndata: x\n\n", want: []ev{
		{": ping\n\n", "", ""},
		{"data: x\n\n", "", "=x"},
	}, wantErr: io.EOF},
	{name: "CommentInsideEvent", give: "data: a\n:keep-alive\ndata: b\n\n", want: []ev{{"data: a\n:keep-alive\ndata: b\n\n", "", "=a\nb"}}, wantErr: io.EOF},
	{name: "OtherFieldsIgnored", give: "id: 7\nretry: 100\nfoo: bar\ndata: x\n\n", want: []ev{{"id: 7\nretry: 100\nfoo: bar\ndata: x\n\n", "", "=x"}}, wantErr: io.EOF},
	{name: "FieldNamesAreCaseSensitive", give: "Data: x\nEVENT: y\n\n", want: []ev{{"Data: x\nEVENT: y\n\n", "", ""}}, wantErr: io.EOF},
	{name: "BlankLinesBeforeEventAreInRaw", give: "\n\r\ndata: x\n\n\n", want: []ev{{"\n\r\ndata: x\n\n", "", "=x"}}, wantErr: io.EOF},
	{name: "BOM", give: "\xEF\xBB\xBFdata: x\n\n", want: []ev{{"\xEF\xBB\xBFdata: x\n\n", "", "=x"}}, wantErr: io.EOF},
	{name: "BOMOnlyAtStart", give: "data: x\n\n\xEF\xBB\xBFdata: y\n\n", want: []ev{
		{"data: x\n\n", "", "=x"},
		{"\xEF\xBB\xBFdata: y\n\n", "", ""},
	}, wantErr: io.EOF},
	{name: "PartialBOM", give: "\xEF\xBB", wantErr: io.ErrUnexpectedEOF},
	{name: "FinalEventWithoutBlankLine", give: "data: x\n\ndata: [DONE]\n", want: []ev{
		{"data: x\n\n", "", "=x"},
		{"data: [DONE]\n", "", "=[DONE]"},
	}, wantErr: io.EOF},
	{name: "FinalEventEndingInCR", give: "data: [DONE]\r", want: []ev{{"data: [DONE]\r", "", "=[DONE]"}}, wantErr: io.EOF},
	{name: "EOFMidLine", give: "data: x\n\ndata: {\"trunc", want: []ev{{"data: x\n\n", "", "=x"}}, wantErr: io.ErrUnexpectedEOF},
	{name: "EOFMidLineOfMultiLineEvent", give: "event: a\ndata: b\ndata", wantErr: io.ErrUnexpectedEOF},
	{name: "OpenAIChat", give: "data: {\"choices\":[{\"delta\":{\"content\":\"4 °C\"}}]}\n\ndata: [DONE]\n\n", want: []ev{
		{"data: {\"choices\":[{\"delta\":{\"content\":\"4 °C\"}}]}\n\n", "", `={"choices":[{"delta":{"content":"4 °C"}}]}`},
		{"data: [DONE]\n\n", "", "=[DONE]"},
	}, wantErr: io.EOF},
	{name: "AnthropicPing", give: "event: ping\ndata: {\"type\": \"ping\"}\n\n", want: []ev{
		{"event: ping\ndata: {\"type\": \"ping\"}\n\n", "=ping", `={"type": "ping"}`},
	}, wantErr: io.EOF},
}

func TestReader(t *testing.T) {
	for _, tt := range readerTests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := readAll(NewReader(strings.NewReader(tt.give)))
			if fmt.Sprint(evs) != fmt.Sprint(tt.want) {
				t.Errorf("events = %v, want %v", evs, tt.want)
			}
			if err != tt.wantErr {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestReaderOneByteReads reads every table case one byte per Read, which
// exercises every resumable state. The events and the bytes are the same;
// only a "\n" completing a "\r\n" blank line may move into the next Raw,
// because Next doesn't wait for it.
func TestReaderOneByteReads(t *testing.T) {
	for _, tt := range readerTests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := readAll(NewReader(iotest.OneByteReader(strings.NewReader(tt.give))))
			if got, want := fields(evs), fields(tt.want); got != want {
				t.Errorf("fields = %s, want %s", got, want)
			}
			if got, want := raws(evs), raws(tt.want); strings.TrimRight(got, "\n") != strings.TrimRight(want, "\n") {
				t.Errorf("raw = %q, want %q", got, want)
			}
			if err != tt.wantErr {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func fields(evs []ev) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "{%s %s}", field(e.name), field(e.data))
	}
	return b.String()
}

func raws(evs []ev) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.raw)
	}
	return b.String()
}

func TestReaderErrorsAreSticky(t *testing.T) {
	r := NewReader(strings.NewReader("data: x"))
	for i := range 3 {
		if _, err := r.Next(); err != io.ErrUnexpectedEOF {
			t.Errorf("Next #%d err = %v, want %v", i, err, io.ErrUnexpectedEOF)
		}
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)))
	evs, err := readAll(r)
	if want := []ev{{"data: a\n\n", "", "=a"}}; fmt.Sprint(evs) != fmt.Sprint(want) {
		t.Errorf("events = %v, want %v", evs, want)
	}
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want %v", err, boom)
	}
}

func TestReaderNoProgress(t *testing.T) {
	_, err := NewReader(emptyReader{}).Next()
	if !errors.Is(err, io.ErrNoProgress) {
		t.Errorf("err = %v, want %v", err, io.ErrNoProgress)
	}
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func TestReaderMaxEventSize(t *testing.T) {
	tests := []struct {
		name    string
		size    int
		give    string
		want    []ev
		wantErr error
	}{
		{name: "Fits", size: 12, give: "data: 1234\n\n", want: []ev{{"data: 1234\n\n", "", "=1234"}}, wantErr: io.EOF},
		{name: "OneByteOver", size: 11, give: "data: 1234\n\n", wantErr: ErrTooLarge},
		{name: "TooLarge", size: 10, give: "data: a\n\ndata: 123456789\n\ndata: b\n\n", want: []ev{{"data: a\n\n", "", "=a"}}, wantErr: ErrTooLarge},
		{name: "BlankLinesCount", size: 10, give: strings.Repeat("\n", 20) + "data: a\n\n", wantErr: ErrTooLarge},
		{name: "GrowsToSize", size: 1 << 20, give: "data: " + strings.Repeat("x", 100_000) + "\n\n", want: []ev{{"data: " + strings.Repeat("x", 100_000) + "\n\n", "", "=" + strings.Repeat("x", 100_000)}}, wantErr: io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := readAll(NewReaderSize(strings.NewReader(tt.give), tt.size))
			if fmt.Sprint(evs) != fmt.Sprint(tt.want) {
				t.Errorf("events = %.200v, want %.200v", evs, tt.want)
			}
			if err != tt.wantErr {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestReaderNoHoldBack feeds chunks through a pipe and checks that Next returns
// every event complete in what was written without reading further.
func TestReaderNoHoldBack(t *testing.T) {
	tests := []struct {
		name string
		give []string // one write each; Next must return every event complete after it
		want [][]ev   // events returned after each write
	}{
		{
			name: "EventPerWrite",
			give: []string{"data: a\n\n", "data: b\n\n"},
			want: [][]ev{{{"data: a\n\n", "", "=a"}}, {{"data: b\n\n", "", "=b"}}},
		},
		{
			name: "TwoEventsInOneWrite",
			give: []string{"data: a\n\ndata: b\n\n", ": ping\n\n"},
			want: [][]ev{{{"data: a\n\n", "", "=a"}, {"data: b\n\n", "", "=b"}}, {{": ping\n\n", "", ""}}},
		},
		{
			name: "EventSplitOverWrites",
			give: []string{"data: a", "\n", "\ndata: b\n", "\n"},
			want: [][]ev{nil, nil, {{"data: a\n\n", "", "=a"}}, {{"data: b\n\n", "", "=b"}}},
		},
		{
			name: "CRBlankLineDoesNotWaitForLF",
			give: []string{"data: a\r\r", "\ndata: b\r\n\r\n"},
			want: [][]ev{{{"data: a\r\r", "", "=a"}}, {{"\ndata: b\r\n\r\n", "", "=b"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pr, pw := io.Pipe()
				defer pw.Close()
				events := make(chan ev)
				go func() {
					defer close(events)
					r := NewReader(pr)
					for {
						e, err := r.Next()
						if err != nil {
							return
						}
						events <- got(e)
					}
				}()
				for i, chunk := range tt.give {
					if _, err := io.WriteString(pw, chunk); err != nil {
						t.Fatal(err)
					}
					var evs []ev
					for range tt.want[i] {
						select {
						case e := <-events:
							evs = append(evs, e)
						case <-time.After(time.Second): // fake time: fires once Next blocks
						}
					}
					synctest.Wait() // Next is blocked in Read: nothing more is coming
					if fmt.Sprint(evs) != fmt.Sprint(tt.want[i]) {
						t.Errorf("events after write #%d = %v, want %v", i, evs, tt.want[i])
					}
				}
				pw.Close()
				for e := range events {
					t.Errorf("event after the last write = %v", e)
				}
			})
		})
	}
}

// FuzzReader checks that Next never panics, terminates, returns exactly the
// stream's bytes in Raw, and agrees with a line-by-line reference parser.
func FuzzReader(f *testing.F) {
	for _, tt := range readerTests {
		f.Add([]byte(tt.give), uint8(0), uint16(0))
		f.Add([]byte(tt.give), uint8(1), uint16(16))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8, size uint16) {
		var rd io.Reader = bytes.NewReader(in)
		if chunk > 0 {
			rd = &chunkReader{b: in, n: int(chunk)}
		}
		r := NewReaderSize(rd, int(size))
		var raw []byte
		var evs []ev
		var err error
		for range len(in) + 1 { // every event has at least one byte
			var e Event
			if e, err = r.Next(); err != nil {
				break
			}
			if len(e.Raw) == 0 || len(e.Raw) > r.max {
				t.Fatalf("len(Raw) = %d, want 1..%d", len(e.Raw), r.max)
			}
			raw = append(raw, e.Raw...)
			evs = append(evs, got(e))
		}
		if err == nil {
			t.Fatalf("Next returned more than %d events", len(in)+1)
		}
		if !bytes.HasPrefix(in, raw) {
			t.Fatalf("Raw of all events = %q, not a prefix of the input %q", raw, in)
		}
		if err == ErrTooLarge {
			return
		}
		// Raw may differ from the reference only by where the "\n" after a
		// "\r" blank line goes, so compare the fields.
		wantEvs, wantErr := reference(in)
		if fields(evs) != fields(wantEvs) || err != wantErr {
			t.Fatalf("events = %v, %v; reference %v, %v", evs, err, wantEvs, wantErr)
		}
		rest := in[len(raw):]
		if len(raw) == 0 {
			rest = bytes.TrimPrefix(rest, bom)
		}
		if err == io.EOF && strings.Trim(string(rest), "\r\n") != "" {
			t.Fatalf("io.EOF with %q not returned", rest)
		}
	})
}

// reference parses a whole stream line by line, the way the SSE spec
// describes it, with Reader's choices: comment-only events are returned and a
// final event without its blank line is returned at io.EOF.
func reference(in []byte) ([]ev, error) {
	var evs []ev
	var e ev
	raw, pos, lines := 0, 0, 0
	if bytes.HasPrefix(in, bom) {
		pos = len(bom)
	}
	for pos < len(in) {
		n := bytes.IndexAny(in[pos:], "\r\n")
		if n < 0 {
			return evs, io.ErrUnexpectedEOF
		}
		line := string(in[pos : pos+n])
		pos += n + 1
		if in[pos-1] == '\r' && pos < len(in) && in[pos] == '\n' {
			pos++
		}
		if line == "" {
			if lines > 0 {
				e.raw = string(in[raw:pos])
				evs = append(evs, e)
				e, lines, raw = ev{}, 0, pos
			}
			continue
		}
		lines++
		if strings.HasPrefix(line, ":") {
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case name == "event":
			e.name = "=" + value
		case name == "data" && e.data == "":
			e.data = "=" + value
		case name == "data":
			e.data += "\n" + value
		}
	}
	if lines > 0 {
		e.raw = string(in[raw:])
		evs = append(evs, e)
	}
	return evs, io.EOF
}

// chunkReader returns b n bytes per Read.
type chunkReader struct {
	b []byte
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[n:]
	return n, nil
}

// chatStream returns an OpenAI Chat Completions stream of n content chunks,
// with the role, finish and usage chunks and [DONE] around them.
func chatStream(n int) []byte {
	const head = `{"id":"chatcmpl-C9xQk2Vd3mYwZJ4rT8bLpA","object":"chat.completion.chunk","created":1767225600,"model":"gpt-5.4","system_fingerprint":"fp_3b2c1a9e7f","choices":[{"index":0,"delta":`
	var b bytes.Buffer
	fmt.Fprintf(&b, "data: %s{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null,\"obfuscation\":\"Xq3\"}\n\n", head)
	for i := range n {
		fmt.Fprintf(&b, "data: %s{\"content\":\" token%d\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null,\"obfuscation\":\"aZ%d\"}\n\n", head, i, i%97)
	}
	fmt.Fprintf(&b, "data: %s{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n", head)
	fmt.Fprintf(&b, "data: %s\n\n", `{"id":"chatcmpl-C9xQk2Vd3mYwZJ4rT8bLpA","object":"chat.completion.chunk","created":1767225600,"model":"gpt-5.4","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":80,"total_tokens":1280,"prompt_tokens_details":{"cached_tokens":1024},"completion_tokens_details":{"reasoning_tokens":64}}}`)
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// responsesStream returns an OpenAI Responses stream of n named delta events.
func responsesStream(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_01\",\"output_index\":0,\"content_index\":0,\"delta\":\" token%d\",\"sequence_number\":%d}\n\n", i, i+4)
	}
	return b.Bytes()
}

func BenchmarkReader(b *testing.B) {
	const events = 500
	streams := []struct {
		name string
		give []byte
	}{
		{"ChatCompletions", chatStream(events)},
		{"Responses", responsesStream(events)},
	}
	for _, s := range streams {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(s.give)))
			var rd bytes.Reader
			n := 0
			for b.Loop() {
				rd.Reset(s.give)
				r := NewReader(&rd)
				for {
					if _, err := r.Next(); err != nil {
						break
					}
					n++
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/event")
		})
	}
}

// TestReaderBuffered checks Buffered says whether Next has an event without
// reading: after a read that brought two events, before the first is
// taken, between them and not after the second, and not for half an event.
func TestReaderBuffered(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\ndata: b\n\ndata: c\n"))
	if r.Buffered() {
		t.Fatal("Buffered before any read = true")
	}
	var got []string
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		got = append(got, fmt.Sprintf("%s buffered=%v", ev.Data, r.Buffered()))
	}
	want := []string{"a buffered=true", "b buffered=false", "c buffered=false"}
	if !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
}
