package settle

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
)

// fullRecord sets every field, so a field the encoding forgets shows.
func fullRecord(id string) sluice.UsageRecord {
	start := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	used := sluice.Usage{PromptTokens: 120, CompletionTokens: 30, CachedTokens: 64, CacheWriteTokens: 16, ReasoningTokens: 8, TotalTokens: 150, Measured: true}
	return sluice.UsageRecord{
		RequestID: id, KeyID: "web-app", Tenant: "web", Alias: "fast", Protocol: sluice.ProtocolOpenAIChat,
		Stream: true, Status: 200, Code: sluice.CodeCapacityWaitTimeout, Started: start,
		Latency: 1250 * time.Millisecond, TTFT: 320 * time.Millisecond, Usage: used,
		Executions: []sluice.Execution{
			{EdgeID: "k1/ep/m", CredentialID: "k1", AccountID: "org-1", EndpointID: "ep", Model: "m", Status: sluice.ExecutionRate,
				HTTPStatus: 429, Error: "upstream answered 429", Started: start, FirstByte: 10 * time.Millisecond, Duration: 11 * time.Millisecond,
				Expected: []string{"org-1", "org-3"}},
			{EdgeID: "k2/ep/m", CredentialID: "k2", AccountID: "org-2", EndpointID: "ep", Model: "m", Status: sluice.ExecutionOK,
				Protocol: sluice.ProtocolAnthropic, HTTPStatus: 200, Started: start.Add(time.Second), FirstByte: 20 * time.Millisecond, Duration: time.Second, Usage: used,
				Expected: []string{"org-1", "org-3"}, Fallback: "failed:rate", Owner: sluice.Owner{Tenant: "acme", User: "bob"}},
		},
		Job:     &sluice.JobUsage{State: "completed", Submitted: start, Ended: start.Add(time.Minute), Seconds: 8.5},
		EndUser: "user-7", TaskType: "section_generation", Pool: "paid", Priority: "interactive", Affinity: sluice.PlacementHit,
		Profile: "paid", CacheHit: true,
		Billing: &sluice.Charge{Account: "acme", Plan: "standard", PriceVersion: "standard/fast@2026-01-01T00:00:00Z",
			CostVersion: "m@2026-01-01T00:00:00Z", Price: 1234, Cost: 321, Unmeasured: true},
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

// asVersion1 is rec as a version 1 payload holds it: executions without
// Expected and Fallback, and no end user, task type, pool, priority or
// charge, which that layout did not have, nor what version 3 lacks.
func asVersion1(rec sluice.UsageRecord) sluice.UsageRecord {
	rec = asVersion3(rec)
	rec.EndUser, rec.TaskType, rec.Pool, rec.Priority, rec.Billing = "", "", "", "", nil
	for i := range rec.Executions {
		rec.Executions[i].Expected, rec.Executions[i].Fallback = nil, ""
	}
	return rec
}

// asVersion3 is rec as a version 3 payload holds it: no cache-write tokens
// in any usage, and no affinity placement, nor what version 4 lacks.
func asVersion3(rec sluice.UsageRecord) sluice.UsageRecord {
	rec = asVersion4(rec)
	rec.Affinity = ""
	rec.Usage.CacheWriteTokens = 0
	for i := range rec.Executions {
		rec.Executions[i].Usage.CacheWriteTokens = 0
	}
	return rec
}

// asVersion4 is rec as a version 4 payload holds it: executions without
// their credential's owner, nor what version 5 lacks.
func asVersion4(rec sluice.UsageRecord) sluice.UsageRecord {
	rec = asVersion5(rec)
	rec.Executions = slices.Clone(rec.Executions)
	for i := range rec.Executions {
		rec.Executions[i].Owner = sluice.Owner{}
	}
	return rec
}

// asVersion5 is rec as a version 5 payload holds it: no quota profile,
// nor what version 6 lacks.
func asVersion5(rec sluice.UsageRecord) sluice.UsageRecord {
	rec = asVersion6(rec)
	rec.Profile = ""
	return rec
}

// asVersion7 is rec as a version 7 payload holds it: no cache hit.
func asVersion7(rec sluice.UsageRecord) sluice.UsageRecord {
	rec.CacheHit = false
	return rec
}

// asVersion6 is rec as a version 6 payload holds it: executions without
// their upstream protocol, nor what version 7 lacks.
func asVersion6(rec sluice.UsageRecord) sluice.UsageRecord {
	rec = asVersion7(rec)
	rec.Executions = slices.Clone(rec.Executions)
	for i := range rec.Executions {
		rec.Executions[i].Protocol = ""
	}
	return rec
}

// testdata/v7-record.frame is fullRecord("r1") as the encoder of version 7
// wrote it, before records marked cache hits.
func TestVersion7FrameDecodes(t *testing.T) {
	old, err := os.ReadFile("testdata/v7-record.frame")
	if err != nil {
		t.Fatal(err)
	}
	got, unread := decodeFrames(old)
	if unread != 0 || len(got) != 1 {
		t.Fatalf("decodeFrames(version 7 frame) = %d records, %d bytes unread; want 1, 0", len(got), unread)
	}
	if diff := cmp.Diff(asVersion7(fullRecord("r1")), got[0]); diff != "" {
		t.Errorf("decoded version 7 record differs (-want +got):\n%s", diff)
	}
}

// testdata/v6-record.frame is fullRecord("r1") as the encoder of version 6
// wrote it, before executions carried their upstream protocol.
func TestVersion6FrameDecodes(t *testing.T) {
	old, err := os.ReadFile("testdata/v6-record.frame")
	if err != nil {
		t.Fatal(err)
	}
	got, unread := decodeFrames(old)
	if unread != 0 || len(got) != 1 {
		t.Fatalf("decodeFrames(version 6 frame) = %d records, %d bytes unread; want 1, 0", len(got), unread)
	}
	if diff := cmp.Diff(asVersion6(fullRecord("r1")), got[0]); diff != "" {
		t.Errorf("decoded version 6 record differs (-want +got):\n%s", diff)
	}
}

// testdata/v5-record.frame is fullRecord("r1") as the encoder of version 5
// wrote it, before records carried their quota profile: it decodes, with
// no profile.
func TestVersion5FrameDecodes(t *testing.T) {
	old, err := os.ReadFile("testdata/v5-record.frame")
	if err != nil {
		t.Fatal(err)
	}
	got, unread := decodeFrames(old)
	if unread != 0 || len(got) != 1 {
		t.Fatalf("decodeFrames(version 5 frame) = %d records, %d bytes unread; want 1, 0", len(got), unread)
	}
	if diff := cmp.Diff(asVersion5(fullRecord("r1")), got[0]); diff != "" {
		t.Errorf("decoded version 5 record differs (-want +got):\n%s", diff)
	}
}

// testdata/v4-record.frame is fullRecord("r1") as the encoder of version 4
// wrote it, before executions named their credential's owner.
func TestVersion4FrameDecodes(t *testing.T) {
	old, err := os.ReadFile("testdata/v4-record.frame")
	if err != nil {
		t.Fatal(err)
	}
	got, unread := decodeFrames(old)
	if unread != 0 || len(got) != 1 {
		t.Fatalf("decodeFrames(version 4 frame) = %d records, %d bytes unread; want 1, 0", len(got), unread)
	}
	if diff := cmp.Diff(asVersion4(fullRecord("r1")), got[0]); diff != "" {
		t.Errorf("decoded version 4 record differs (-want +got):\n%s", diff)
	}
}

// testdata/v3-record.frame is fullRecord("r1") as the encoder of version 3
// wrote it, before usage had cache-write tokens and records a placement.
func TestVersion3FrameDecodes(t *testing.T) {
	old, err := os.ReadFile("testdata/v3-record.frame")
	if err != nil {
		t.Fatal(err)
	}
	got, unread := decodeFrames(old)
	if unread != 0 || len(got) != 1 {
		t.Fatalf("decodeFrames(version 3 frame) = %d records, %d bytes unread; want 1, 0", len(got), unread)
	}
	if diff := cmp.Diff(asVersion3(fullRecord("r1")), got[0]); diff != "" {
		t.Errorf("decoded version 3 record differs (-want +got):\n%s", diff)
	}
}

// testdata/v1-record.frame is fullRecord("r1") as the encoder of version 1
// wrote it, before executions had Expected and Fallback.
func TestVersion1FrameDecodes(t *testing.T) {
	old, err := os.ReadFile("testdata/v1-record.frame")
	if err != nil {
		t.Fatal(err)
	}
	got, unread := decodeFrames(old)
	if unread != 0 || len(got) != 1 {
		t.Fatalf("decodeFrames(version 1 frame) = %d records, %d bytes unread; want 1, 0", len(got), unread)
	}
	if diff := cmp.Diff(asVersion1(fullRecord("r1")), got[0]); diff != "" {
		t.Errorf("decoded version 1 record differs (-want +got):\n%s", diff)
	}
}

// TestReplaysASpoolOfBothVersions replays a segment that a process of the
// previous release left (a version 1 frame) followed by one of this
// release: both records reach the store whole.
func TestReplaysASpoolOfBothVersions(t *testing.T) {
	root := t.TempDir()
	dead := filepath.Join(root, writerPrefix+"previous-release")
	if err := os.Mkdir(dead, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, lockName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile("testdata/v1-record.frame")
	if err != nil {
		t.Fatal(err)
	}
	current := fullRecord("r2")
	if err := os.WriteFile(filepath.Join(dead, "00000001"+segmentExt), appendFrame(old, &current), 0o600); err != nil {
		t.Fatal(err)
	}

	store := &flakyStore{}
	r := newRecorder(t, store, root, 16, 10*time.Millisecond)
	defer r.Close()
	eventually(t, "2 replayed records", func() bool { return store.stored(t) == 2 })
	got, err := store.ListUsage(t.Context(), ledger.UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	want := []sluice.UsageRecord{asVersion1(fullRecord("r1")), current}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("replayed records differ (-want +got):\n%s", diff)
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
