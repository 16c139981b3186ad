package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/store"
)

// statusRecord is the JSON form of a store.Status in <prefix>status:<kind>.
type statusRecord struct {
	State  sluice.UpstreamStatus `json:"state"`
	Reason string                `json:"reason,omitempty"`
	Since  time.Time             `json:"since"`
}

// SetStatus stores the status of a credential or account (kind) for every
// replica to see; State active, the default, deletes it.
func (s *Store) SetStatus(ctx context.Context, kind, id string, st store.Status) error {
	key := s.prefix + "status:" + kind
	var err error
	if st.State == sluice.UpstreamActive {
		err = s.rdb.HDel(ctx, key, id).Err()
	} else {
		b, jerr := json.Marshal(statusRecord(st))
		if jerr != nil {
			return fmt.Errorf("redisstore: status %s %s: %w", kind, id, jerr)
		}
		err = s.rdb.HSet(ctx, key, id, b).Err()
	}
	if err != nil {
		return unavailable("set status "+kind+" "+id, err)
	}
	return nil
}

// Statuses returns every stored (non-active) status of kind, by ID. An entry
// that does not decode is reported as an error rather than skipped, since
// skipping it would silently re-enable a disabled credential.
func (s *Store) Statuses(ctx context.Context, kind string) (map[string]store.Status, error) {
	m, err := s.rdb.HGetAll(ctx, s.prefix+"status:"+kind).Result()
	if err != nil {
		return nil, unavailable("statuses "+kind, err)
	}
	out := make(map[string]store.Status, len(m))
	for id, raw := range m {
		var r statusRecord
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			return nil, fmt.Errorf("redisstore: status %s %s: %w", kind, id, err)
		}
		out[id] = store.Status(r)
	}
	return out, nil
}
