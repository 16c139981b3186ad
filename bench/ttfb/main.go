// Command ttfb is a streaming load client: --concurrency callers each open
// chat completion streams against --url, one after another, for --duration.
// For every stream it measures the time to first byte (until the first
// complete `data:` event) and records when each event arrived, to check
// that the proxy passes every upstream event on as it comes: an event that
// arrives in the same read as the one before, or less than a quarter of the
// upstream's --chunk-delay after it, counts as merged (target 0). Callers
// start their streams spread out in time, so what is measured is the
// latency of one stream, not of a burst of simultaneous ones.
//
// It prints one line of key=value pairs for scripts (see run.sh):
//
//	streams=480 errors=0 incomplete=0 ttfb_p50_us=412 ttfb_p99_us=1730 ttfb_mean_us=520 events=9600 merged=0 min_gap_us=19872
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/bench"
)

type result struct {
	ttfb     time.Duration
	events   int
	merged   int
	minGap   time.Duration // smallest spacing between two events; 0 with fewer than two
	complete bool          // ended with [DONE]
	err      error
}

func main() {
	url := flag.String("url", "", "chat completions URL, e.g. http://127.0.0.1:8080/v1/chat/completions")
	key := flag.String("key", "", "bearer key sent as Authorization")
	model := flag.String("model", "bench", "model field of the request")
	concurrency := flag.Int("concurrency", 16, "concurrent streaming callers")
	duration := flag.Duration("duration", 10*time.Second, "how long callers start new streams")
	maxTokens := flag.Int("max-tokens", 16, "max_tokens of each request: content events per stream")
	chunkDelay := flag.Duration("chunk-delay", 20*time.Millisecond, "the upstream's delay between events; events closer than a quarter of it count as merged")
	flag.Parse()
	if *url == "" || *concurrency < 1 || *chunkDelay <= 0 {
		fmt.Fprintln(os.Stderr, "ttfb: --url is required; --concurrency and --chunk-delay must be > 0")
		os.Exit(2)
	}
	body := fmt.Appendf(nil, `{"model":%q,"stream":true,"stream_options":{"include_usage":true},"max_tokens":%d,`+
		`"messages":[{"role":"system","content":"You are a concise assistant for a travel agency."},`+
		`{"role":"user","content":"Suggest a quiet weekend itinerary near a river, with one museum and one long walk."}]}`,
		*model, *maxTokens)
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns: 4 * *concurrency, MaxIdleConnsPerHost: 4 * *concurrency, DisableCompression: true,
	}}
	minGap := *chunkDelay / 4

	ctx, cancel := context.WithTimeout(context.Background(), *duration+30*time.Second)
	defer cancel()
	deadline := time.Now().Add(*duration)
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
	)
	// Streams all last about as long, so callers that started together
	// would keep arriving together and each would wait for the others'
	// requests: spread their starts over one stream's length, and pause a
	// random fraction of a chunk delay between streams so they stay apart.
	period := *chunkDelay * time.Duration(*maxTokens+4)
	for i := range *concurrency {
		wg.Go(func() {
			buf := make([]byte, 32<<10)
			time.Sleep(period * time.Duration(i) / time.Duration(*concurrency))
			for time.Now().Before(deadline) && ctx.Err() == nil {
				r := stream(ctx, client, *url, *key, body, buf, minGap)
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
				time.Sleep(rand.N(*chunkDelay))
			}
		})
	}
	wg.Wait()
	report(results)
}

// stream runs one streaming request and measures it.
func stream(ctx context.Context, client *http.Client, url, key string, body, buf []byte, minGap time.Duration) result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return result{err: fmt.Errorf("status %d: %s", resp.StatusCode, b)}
	}
	events, err := bench.ReadEvents(resp.Body, buf)
	r := result{events: len(events), err: err, merged: bench.Merged(events, minGap)}
	if len(events) == 0 {
		if r.err == nil {
			r.err = fmt.Errorf("stream without events")
		}
		return r
	}
	r.ttfb = events[0].At.Sub(start)
	r.complete = string(events[len(events)-1].Data) == "[DONE]"
	for i := 1; i < len(events); i++ {
		if g := events[i].At.Sub(events[i-1].At); i == 1 || g < r.minGap {
			r.minGap = g
		}
	}
	return r
}

func report(results []result) {
	var (
		ttfbs                      []time.Duration
		errs, incomplete, evs, mrg int
		minGap                     time.Duration
		firstErr                   error
		sum                        time.Duration
	)
	for _, r := range results {
		if r.err != nil {
			errs++
			if firstErr == nil {
				firstErr = r.err
			}
		}
		if r.events == 0 {
			continue
		}
		ttfbs = append(ttfbs, r.ttfb)
		sum += r.ttfb
		evs += r.events
		mrg += r.merged
		if !r.complete {
			incomplete++
		}
		if r.events > 1 && (minGap == 0 || r.minGap < minGap) {
			minGap = r.minGap
		}
	}
	if firstErr != nil {
		fmt.Fprintf(os.Stderr, "ttfb: %d streams failed; first: %v\n", errs, firstErr)
	}
	slices.Sort(ttfbs)
	var mean time.Duration
	if len(ttfbs) > 0 {
		mean = sum / time.Duration(len(ttfbs))
	}
	fmt.Printf("streams=%d errors=%d incomplete=%d ttfb_p50_us=%d ttfb_p99_us=%d ttfb_mean_us=%d events=%d merged=%d min_gap_us=%d\n",
		len(results), errs, incomplete, quantile(ttfbs, 0.50).Microseconds(), quantile(ttfbs, 0.99).Microseconds(),
		mean.Microseconds(), evs, mrg, minGap.Microseconds())
	if errs > 0 || len(ttfbs) == 0 {
		os.Exit(1)
	}
}

// quantile returns the q-quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
