package capacity

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/periodic"
	"github.com/sluicehq/sluice/internal/store"
)

// Kinds of things with a shared status.
const (
	KindCredential = "credential"
	KindAccount    = "account"
	KindEndpoint   = "endpoint" // open while a replica's breaker for it is open
)

// Statuses is every replica's view of the shared credential and account
// statuses (disabled by a failure or an operator, draining). It re-reads the
// store on a short interval so a change made anywhere is seen everywhere
// within about a second; changes made here are visible at once. Reads are
// lock-free. Safe for concurrent use.
type Statuses struct {
	store store.Statuses
	log   *slog.Logger
	view  atomic.Pointer[statusView]
}

type statusView struct {
	credentials map[string]store.Status
	accounts    map[string]store.Status
	endpoints   map[string]store.Status
}

// NewStatuses returns a view over s; call Refresh or Run to fill it.
func NewStatuses(s store.Statuses, log *slog.Logger) *Statuses {
	st := &Statuses{store: s, log: log}
	st.view.Store(&statusView{credentials: map[string]store.Status{}, accounts: map[string]store.Status{}, endpoints: map[string]store.Status{}})
	return st
}

// Credential returns the credential's status; active when none is stored.
func (s *Statuses) Credential(id string) store.Status { return get(s.view.Load().credentials, id) }

// Account returns the account's status; active when none is stored.
func (s *Statuses) Account(id string) store.Status { return get(s.view.Load().accounts, id) }

// Endpoint returns the endpoint's shared breaker status; active when none is stored.
func (s *Statuses) Endpoint(id string) store.Status { return get(s.view.Load().endpoints, id) }

func get(m map[string]store.Status, id string) store.Status {
	if st, ok := m[id]; ok {
		return st
	}
	return store.Status{State: sluice.UpstreamActive}
}

// Set stores a status and makes it visible here at once.
func (s *Statuses) Set(ctx context.Context, kind, id string, st store.Status) error {
	if st.Since.IsZero() {
		st.Since = time.Now().UTC()
	}
	if err := s.store.SetStatus(ctx, kind, id, st); err != nil {
		return err
	}
	return s.Refresh(ctx)
}

// Refresh re-reads every status from the store.
func (s *Statuses) Refresh(ctx context.Context) error {
	creds, err := s.store.Statuses(ctx, KindCredential)
	if err != nil {
		return err
	}
	accts, err := s.store.Statuses(ctx, KindAccount)
	if err != nil {
		return err
	}
	eps, err := s.store.Statuses(ctx, KindEndpoint)
	if err != nil {
		return err
	}
	s.view.Store(&statusView{credentials: creds, accounts: accts, endpoints: eps})
	return nil
}

// Run refreshes every interval until ctx ends. Failures keep the last view.
func (s *Statuses) Run(ctx context.Context, interval time.Duration) {
	periodic.Run(ctx, interval, func(ctx context.Context) {
		if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, "status refresh failed; keeping the last view", slog.Any("err", err))
		}
	})
}
