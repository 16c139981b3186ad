package app_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sqldb"
)

type usageRecord = sluice.UsageRecord

// usage waits until the gateway's batch writer has stored at least n usage
// records and returns them, oldest first.
func (h *harness) usage(t *testing.T, n int) []usageRecord {
	t.Helper()
	db, err := sqldb.Open(t.Context(), "sqlite://"+h.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := sqlledger.New(db)
	var recs []usageRecord
	eventually(t, 5*time.Second, "usage records written", func() bool {
		recs, err = store.ListUsage(t.Context(), ledger.UsageFilter{})
		return err == nil && len(recs) >= n
	})
	return recs
}

// TestUsageIsRecordedOnEveryWire: the usage the provider measured (prompt,
// completion and cached tokens) reaches the request's usage record on
// every wire, whole and streamed. The simulated provider counts one
// conversation alike in every protocol and, with its prompt cache on,
// reads a repeated prompt from the cache: the second request's prompt is
// all cached.
func TestUsageIsRecordedOnEveryWire(t *testing.T) {
	eachWire(t, wires, func(t *testing.T, w wire) {
		h := w.harness(t, catalogTemplate, "{backend: memory}",
			simulator.Options{PromptCache: time.Minute, Default: simulator.Behavior{Account: "org"}})
		for _, stream := range []bool{false, true} {
			resp := h.send(t.Context(), w.caller, keyWeb, "only-a", stream, w.caller.body("only-a", "hello there", stream), nil)
			if resp == nil {
				t.FailNow()
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("stream %v: %d %s", stream, resp.StatusCode, b)
			}
		}
		// "hello there": 2 words, 3 tokens for the message and 3 for the
		// prompt; 16 words of answer, but for a chat request that sets its
		// max_tokens (Messages' 64, translated), answered in full.
		completion := int64(16)
		if w.caller == messagesCaller && w.upstream == chatUpstream {
			completion = 64
		}
		want := map[bool]sluice.Usage{
			false: {PromptTokens: 8, CompletionTokens: completion, Measured: true},
			true:  {PromptTokens: 8, CompletionTokens: completion, CachedTokens: 8, Measured: true},
		}
		for _, rec := range h.usage(t, 2) {
			got := rec.Usage
			got.TotalTokens, got.CacheWriteTokens, got.ReasoningTokens = 0, 0, 0
			if got != want[rec.Stream] {
				t.Errorf("usage of the %s answer = %+v, want %+v", map[bool]string{false: "whole", true: "streamed"}[rec.Stream], rec.Usage, want[rec.Stream])
			}
		}
		w.wantUpstreamCalls(t, h)
	})
}
