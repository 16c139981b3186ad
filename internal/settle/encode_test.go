package settle

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
)

// fullRecord sets every field, so a field the encoding forgets shows.
func fullRecord(id string) sluice.UsageRecord {
	start := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	used := sluice.Usage{PromptTokens: 120, CompletionTokens: 30, CachedTokens: 64, ReasoningTokens: 8, TotalTokens: 150, Measured: true}
	return sluice.UsageRecord{
		RequestID: id, KeyID: "web-app", Tenant: "web", Alias: "fast", Protocol: sluice.ProtocolOpenAIChat,
		Stream: true, Status: 200, Code: sluice.CodeCapacityWaitTimeout, Started: start,
		Latency: 1250 * time.Millisecond, TTFT: 320 * time.Millisecond, Usage: used,
		Executions: []sluice.Execution{
			{EdgeID: "k1/ep/m", CredentialID: "k1", AccountID: "org-1", EndpointID: "ep", Model: "m", Status: sluice.ExecutionRate,
				HTTPStatus: 429, Error: "upstream answered 429", Started: start, FirstByte: 10 * time.Millisecond, Duration: 11 * time.Millisecond},
			{EdgeID: "k2/ep/m", CredentialID: "k2", AccountID: "org-2", EndpointID: "ep", Model: "m", Status: sluice.ExecutionOK,
				HTTPStatus: 200, Started: start.Add(time.Second), FirstByte: 20 * time.Millisecond, Duration: time.Second, Usage: used},
		},
		Job: &sluice.JobUsage{State: "completed", Submitted: start, Ended: start.Add(time.Minute), Seconds: 8.5},
	}
}

func TestFrameRoundTrips(t *testing.T) {
	tests := []struct {
		name string
		give sluice.UsageRecord
	}{
		{"EveryField", fullRecord("r1")},
		{"Bare", sluice.UsageRecord{RequestID: "bare", Code: sluice.CodeNoCredentials, Status: 401}},
		{"NegativeAndHuge", sluice.UsageRecord{RequestID: "n", Status: -1, Latency: -time.Second, Usage: sluice.Usage{TotalTokens: 1<<63 - 1}}},
	}
	var b []byte
	for _, tt := range tests {
		b = appendFrame(b, &tt.give)
	}
	got, unread := decodeFrames(b)
	if unread != 0 || len(got) != len(tests) {
		t.Fatalf("decodeFrames = %d records, %d bytes unread; want %d, 0", len(got), unread, len(tests))
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.give, got[i]); diff != "" {
				t.Errorf("decoded record differs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTornTailIsSkipped(t *testing.T) {
	first, second := fullRecord("a"), fullRecord("b")
	whole := appendFrame(appendFrame(nil, &first), &second)
	cut := len(appendFrame(nil, &first))
	for end := cut; end < len(whole); end++ {
		got, unread := decodeFrames(whole[:end])
		if len(got) != 1 || got[0].RequestID != "a" || unread != end-cut {
			t.Fatalf("decodeFrames(cut at %d) = %d records, %d unread; want record a, %d unread", end, len(got), unread, end-cut)
		}
	}
	damaged := append([]byte(nil), whole...)
	damaged[len(damaged)-3] ^= 0xff
	if got, unread := decodeFrames(damaged); len(got) != 1 || unread != len(whole)-cut {
		t.Errorf("decodeFrames(damaged second frame) = %d records, %d unread; want 1, %d", len(got), unread, len(whole)-cut)
	}
}

// FuzzDecodeFrames checks that any bytes decode without panicking, and that
// what decodes encodes back to the same frames.
func FuzzDecodeFrames(f *testing.F) {
	for _, id := range []string{"r1", ""} {
		rec := fullRecord(id)
		f.Add(appendFrame(nil, &rec))
	}
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, unread := decodeFrames(b)
		var again []byte
		for i := range recs {
			again = appendFrame(again, &recs[i])
		}
		back, _ := decodeFrames(again)
		if unread < 0 || unread > len(b) || !cmp.Equal(recs, back) {
			t.Errorf("decodeFrames: %d unread of %d; re-encoded records differ: %v", unread, len(b), cmp.Diff(recs, back))
		}
	})
}
