package simulator

import (
	"net/http"
	"sync"
	"time"
)

// Recorded is one request as the simulator received it, with the outcome.
type Recorded struct {
	Key    string // credential (bearer, x-api-key or fal key); "" for none
	Path   string // URL path, e.g. "/v1/chat/completions"
	Model  string // model field of the body; "" when absent or unparsable
	Stream bool   // stream field of a chat completion
	Body   []byte // request body as received; read-only
	// Status is the status sent: 0 while the response is pending or when the
	// simulator dropped the connection before headers (Close), 499 when the
	// client went away before headers.
	Status int
	// Cancelled reports that the client went away before the response was
	// complete.
	Cancelled bool
	At        time.Time   // when the request arrived
	Header    http.Header // copy of the request headers; read-only
}

// journal keeps the records and the per-key counters. Safe for concurrent use.
type journal struct {
	mu        sync.Mutex
	max       int         // see Options.MaxRecords
	recs      []*Recorded // ring buffer once len(recs) == max > 0
	head      int         // index of the oldest record when the ring is full
	counts    map[string]int
	cancelled int
}

func (j *journal) init(max int) {
	j.max = max
	j.counts = make(map[string]int)
}

// add records an arriving request and returns the record that the response
// path updates through setStatus and cancel.
func (j *journal) add(key string, r *http.Request, body []byte, model string, stream bool) *Recorded {
	rec := &Recorded{Key: key, Path: r.URL.Path, Model: model, Stream: stream, Body: body, At: time.Now()}
	if j.max >= 0 {
		rec.Header = r.Header.Clone() // outside the lock: it allocates
	}
	j.mu.Lock()
	j.counts[key]++
	switch {
	case j.max < 0:
	case j.max == 0 || len(j.recs) < j.max:
		j.recs = append(j.recs, rec)
	default:
		j.recs[j.head] = rec
		j.head = (j.head + 1) % j.max
	}
	j.mu.Unlock()
	return rec
}

func (j *journal) setStatus(rec *Recorded, status int) {
	j.mu.Lock()
	rec.Status = status
	j.mu.Unlock()
}

// cancel marks rec as abandoned by its client; status is what it was sent
// (499 when headers never went out).
func (j *journal) cancel(rec *Recorded, status int) {
	j.mu.Lock()
	rec.Status = status
	rec.Cancelled = true
	j.cancelled++
	j.mu.Unlock()
}

// Requests returns a copy of the records, oldest first: every request
// received, or the newest Options.MaxRecords of them. Body and Header are
// shared with the simulator and must not be modified. Safe for concurrent
// use.
func (s *Simulator) Requests() []Recorded {
	j := &s.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Recorded, 0, len(j.recs))
	for _, r := range j.recs[j.head:] {
		out = append(out, *r)
	}
	for _, r := range j.recs[:j.head] {
		out = append(out, *r)
	}
	return out
}

// Count returns how many requests arrived with key (any outcome) since New
// or Reset; "" counts requests without a key. Safe for concurrent use.
func (s *Simulator) Count(key string) int {
	s.journal.mu.Lock()
	defer s.journal.mu.Unlock()
	return s.journal.counts[key]
}

// Cancelled returns how many requests since New or Reset had their client go
// away before the response was complete. Safe for concurrent use.
func (s *Simulator) Cancelled() int {
	s.journal.mu.Lock()
	defer s.journal.mu.Unlock()
	return s.journal.cancelled
}

// Reset clears the records, the counters and the peaks. Requests still
// running stay in flight (and in the new peaks) but are not in Requests.
// Safe for concurrent use.
func (s *Simulator) Reset() {
	j := &s.journal
	j.mu.Lock()
	j.recs, j.head = nil, 0
	j.counts = make(map[string]int)
	j.cancelled = 0
	j.mu.Unlock()
	s.gauges.resetPeaks()
}
