package redisstore

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/respcache"
)

// TestResponses: an entry one replica puts is read back whole by another,
// until its TTL; a key never put, or holding what does not decode, is a
// miss.
func TestResponses(t *testing.T) {
	b := newTestBackend(t)
	one, two := b.replica().Responses(), b.replica().Responses()
	ctx := t.Context()
	if e, err := one.Get(ctx, "absent"); e != nil || err != nil {
		t.Fatalf("Get(absent) = %v, %v; want a miss", e, err)
	}
	put := &respcache.Entry{ContentType: "text/event-stream", Chunks: [][]byte{[]byte("data: 1\n\n"), []byte("data: [DONE]\n\n")},
		Model: "gpt-4o-mini", Usage: sluice.Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7, Measured: true}}
	if err := one.Put(ctx, "k", put, time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := two.Get(ctx, "k")
	if err != nil || got == nil || string(got.Encode()) != string(put.Encode()) {
		t.Fatalf("Get(k) on another replica = %+v, %v; want %+v", got, err, put)
	}
	if ttl := b.clients[0].PTTL(ctx, b.prefix+"resp:k").Val(); ttl <= 0 || ttl > time.Second {
		t.Errorf("the entry's TTL is %v, want at most 1s", ttl)
	}
	if err := b.clients[0].Set(ctx, b.prefix+"resp:bad", "not an entry", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if e, err := one.Get(ctx, "bad"); e != nil || err != nil {
		t.Errorf("Get(bad) = %v, %v; want a miss", e, err)
	}
	time.Sleep(1100 * time.Millisecond)
	if e, _ := two.Get(ctx, "k"); e != nil {
		t.Error("the entry outlived its TTL")
	}
}
