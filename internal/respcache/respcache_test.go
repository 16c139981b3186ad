package respcache

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func key(t *testing.T, r Request) (string, bool) {
	t.Helper()
	k, det, err := Key(&r)
	if err != nil {
		t.Fatalf("Key(%s): %v", r.Body, err)
	}
	return k, det
}

func chat(body string) Request {
	return Request{Tenant: "t", Alias: "fast", Protocol: sluice.ProtocolOpenAIChat, Body: []byte(body)}
}

// TestKeyCanonicalRules: requests that differ only in member order
// (nested too), whitespace or the ignored members share a key; a change of
// anything that shapes the answer — a value, a number's spelling, the
// tenant, alias, protocol, stream, include_usage, variant — gives another.
func TestKeyCanonicalRules(t *testing.T) {
	base := `{"model":"fast","temperature":0,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}]}`
	want, det := key(t, chat(base))
	if !det {
		t.Errorf("temperature 0: want deterministic")
	}
	same := []string{
		`{"messages":[{"content":"hi","role":"user"}],"temperature":0,"model":"fast","tools":[{"function":{"parameters":{"properties":{"a":{"type":"string"}},"type":"object"},"name":"f"},"type":"function"}]}`,
		"{ \"model\" : \"fast\",\n \"temperature\":0, \"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}}}]}",
		`{"stream":true,"stream_options":{"include_usage":true},"user":"u1","safety_identifier":"s","metadata":{"a":"b"},"labels":{"x":"y"},"store":true,"prompt_cache_key":"k","prompt_cache_retention":"24h",` + base[1:],
	}
	for _, b := range same {
		if got, _ := key(t, chat(b)); got != want {
			t.Errorf("%s: key differs from the canonical request's", b)
		}
	}
	differ := map[string]Request{
		"content":        chat(`{"model":"fast","temperature":0,"messages":[{"role":"user","content":"hi!"}]}`),
		"number spelled": chat(bytes.NewBufferString(base).String()[:0] + `{"model":"fast","temperature":0.0,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}]}`),
		"array order":    chat(`{"model":"fast","temperature":0,"messages":[{"role":"user","content":"b"},{"role":"user","content":"a"}]}`),
	}
	for _, f := range []func(r *Request){
		func(r *Request) { r.Tenant = "other" },
		func(r *Request) { r.Alias = "slow" },
		func(r *Request) { r.Protocol = sluice.ProtocolAnthropic },
		func(r *Request) { r.Stream = true },
		func(r *Request) { r.IncludeUsage = true },
		func(r *Request) { r.Variant = "beta-1" },
		func(r *Request) { r.Tenant, r.Alias = "tfast", "" }, // length-prefixed: no shift between parts
	} {
		r := chat(base)
		f(&r)
		differ[r.Tenant+"/"+r.Alias+"/"+string(r.Protocol)+"/"+r.Variant] = r
	}
	seen := map[string]string{want: "base"}
	for name, r := range differ {
		got, _ := key(t, r)
		if other, ok := seen[got]; ok {
			t.Errorf("%s: same key as %s", name, other)
		}
		seen[got] = name
	}
	if _, _, err := Key(&Request{Body: []byte(`[1]`)}); err != ErrNotObject {
		t.Errorf("an array body: err %v, want ErrNotObject", err)
	}
}

// TestKeyDeterministic: only a temperature present and zero, at the top
// level or in Gemini's generation config, is deterministic.
func TestKeyDeterministic(t *testing.T) {
	for body, want := range map[string]bool{
		`{"temperature":0}`:                                      true,
		`{"temperature":0.0}`:                                    true,
		`{"temperature":0.2}`:                                    false,
		`{}`:                                                     false, // absent: the upstream's default, not 0
		`{"temperature":"0"}`:                                    false,
		`{"temperature":null}`:                                   false,
		`{"generationConfig":{"temperature":0}}`:                 true,
		`{"generation_config":{"temperature":0}}`:                true,
		`{"generationConfig":{"temperature":1}}`:                 false,
		`{"generationConfig":{"maxOutputTokens":10}}`:            false,
		`{"temperature":1,"generationConfig":{"temperature":0}}`: false,
	} {
		if _, got := key(t, chat(body)); got != want {
			t.Errorf("%s: deterministic %v, want %v", body, got, want)
		}
	}
}

func TestEntryEncodeDecode(t *testing.T) {
	e := &Entry{ContentType: "text/event-stream", Chunks: [][]byte{[]byte("data: a\n\n"), []byte("data: b\n\ndata: [DONE]\n\n")}, Model: "gpt-4o-mini",
		Usage: sluice.Usage{PromptTokens: 12, CompletionTokens: 8, CachedTokens: 3, TotalTokens: 20, Measured: true}, Dropped: "top_k, seed", DroppedTools: "web_search"}
	b := e.Encode()
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.ContentType != e.ContentType || got.Model != e.Model || got.Usage != e.Usage || got.Dropped != e.Dropped || got.DroppedTools != e.DroppedTools || len(got.Chunks) != 2 ||
		!bytes.Equal(got.Chunks[0], e.Chunks[0]) || !bytes.Equal(got.Chunks[1], e.Chunks[1]) {
		t.Errorf("Decode(Encode(e)) = %+v, want %+v", got, e)
	}
	for i := range b {
		if _, err := Decode(b[:i]); err == nil {
			t.Errorf("a torn entry of %d bytes decoded", i)
		}
	}
}

func TestMemoryBoundsAndTTL(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	m := NewMemory(2, 10)
	m.now = func() time.Time { return now }
	entry := func(s string) *Entry { return &Entry{Chunks: [][]byte{[]byte(s)}} }
	_ = m.Put(ctx, "a", entry("aaaa"), time.Minute)
	_ = m.Put(ctx, "b", entry("bbbb"), time.Minute)
	if e, _ := m.Get(ctx, "a"); e == nil { // a is now the most recently used
		t.Fatal("a missing")
	}
	_ = m.Put(ctx, "c", entry("cccc"), time.Minute) // 3 entries: b, the least recently used, goes
	if e, _ := m.Get(ctx, "b"); e != nil {
		t.Error("b kept past the entry bound")
	}
	_ = m.Put(ctx, "d", entry("dddddd"), time.Minute) // 4+4+6 bytes > 10: a, the least recently used, goes
	if n, size := m.Len(); n != 2 || size != 10 {
		t.Errorf("Len = %d entries, %d bytes; want 2, 10", n, size)
	}
	if e, _ := m.Get(ctx, "a"); e != nil {
		t.Error("a kept past the byte bound")
	}
	_ = m.Put(ctx, "big", entry("01234567890"), time.Minute) // larger than the bound: not stored
	if e, _ := m.Get(ctx, "big"); e != nil {
		t.Error("an entry over the byte bound was stored")
	}
	now = now.Add(time.Minute)
	for _, k := range []string{"c", "d"} {
		if e, _ := m.Get(ctx, k); e != nil {
			t.Errorf("%s served after its TTL", k)
		}
	}
	if n, size := m.Len(); n != 0 || size != 0 {
		t.Errorf("after expiry Len = %d, %d; want 0, 0", n, size)
	}
}

// TestFlights: one leader; the followers get its entry, or nil to go
// upstream themselves; a later Join leads a new flight.
func TestFlights(t *testing.T) {
	var f Flights
	leader, lead := f.Join("k")
	if !lead {
		t.Fatal("first Join does not lead")
	}
	want := &Entry{Model: "m"}
	var wg sync.WaitGroup
	got := make([]*Entry, 5)
	for i := range got {
		fl, lead := f.Join("k")
		if lead {
			t.Fatal("a second Join leads")
		}
		wg.Go(func() { got[i], _ = fl.Wait(context.Background()) })
	}
	f.Land("k", leader, want)
	wg.Wait()
	for i, e := range got {
		if e != want {
			t.Errorf("follower %d got %v", i, e)
		}
	}
	fl, lead := f.Join("k")
	if !lead {
		t.Fatal("Join after Land does not lead")
	}
	f.Land("k", fl, nil)
	if e, err := fl.Wait(context.Background()); e != nil || err != nil {
		t.Errorf("a failed leader's flight: %v, %v", e, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fl, _ = f.Join("j")
	if _, err := fl.Wait(ctx); err == nil {
		t.Error("Wait ignores its context")
	}
}
