package memcatalog

import (
	"bytes"
	"context"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/internal/catalog"
)

// auditLog is the Store's audit log, oldest entry first.
type auditLog struct {
	mu      sync.Mutex
	entries []catalog.AuditEntry
}

// AppendAudit stores a copy of e, its time in UTC, and sets e.ID.
func (s *Store) AppendAudit(_ context.Context, e *catalog.AuditEntry) error {
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	e.ID = int64(len(a.entries)) + 1
	c := cloneEntry(*e)
	c.At = c.At.UTC()
	a.entries = append(a.entries, c)
	return nil
}

// ListAudit returns copies of the entries f selects, newest first.
func (s *Store) ListAudit(_ context.Context, f catalog.AuditFilter) ([]catalog.AuditEntry, error) {
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []catalog.AuditEntry
	for _, e := range slices.Backward(a.entries) {
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
		if e.At.Before(f.Since) || f.Action != "" && e.Action != f.Action || f.Target != "" && !slices.Contains(e.Targets, f.Target) {
			continue
		}
		out = append(out, cloneEntry(e))
	}
	return out, nil
}

func cloneEntry(e catalog.AuditEntry) catalog.AuditEntry {
	e.Targets = slices.Clone(e.Targets)
	e.Before, e.After = bytes.Clone(e.Before), bytes.Clone(e.After)
	return e
}
