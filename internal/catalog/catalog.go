// Package catalog defines the durable records of what Sluice serves and who
// may call it: virtual keys, the applied catalog document, and the audit
// log of the admin writes that changed them. Implementations
// live in memcatalog (tests, single process) and sqlcatalog (SQLite,
// PostgreSQL); catalogtest holds the contract suite both must pass. This
// package depends only on package sluice.
package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/sluicehq/sluice"
)

// Errors every implementation returns (wrapped is fine; test with errors.Is).
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
)

// Keys is the durable store of virtual keys. Keys are stored as given: the
// caller hashes secrets before saving. Safe for concurrent use.
type Keys interface {
	// SaveKey inserts or replaces the key with k.ID. It returns ErrConflict
	// when another key already has k.Hash.
	SaveKey(ctx context.Context, k *sluice.Key) error
	// LoadKey returns the key with the ID, or ErrNotFound.
	LoadKey(ctx context.Context, id string) (*sluice.Key, error)
	// ListKeys returns every stored key, ordered by CreatedAt then ID.
	ListKeys(ctx context.Context) ([]*sluice.Key, error)
}

// Documents stores the catalog document last applied through the admin API,
// so a restart serves what the operators applied. Versions start at 1 and
// grow by one per save.
type Documents interface {
	// SaveCatalog stores doc as the next version if the current version is
	// ifVersion (0 = no check); otherwise it returns ErrConflict.
	SaveCatalog(ctx context.Context, doc []byte, ifVersion int64) (version int64, err error)
	// LoadCatalog returns the latest document, or ErrNotFound when none was saved.
	LoadCatalog(ctx context.Context) (doc []byte, version int64, err error)
}

// Audit is the append-only log of admin writes. Entries are never changed
// or deleted through it. Safe for concurrent use.
type Audit interface {
	// AppendAudit stores e and sets e.ID, which grows with every entry.
	AppendAudit(ctx context.Context, e *AuditEntry) error
	// ListAudit returns the entries f selects, newest (highest ID) first.
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
}

// AuditEntry is one admin write: who made it, what it asked, what it
// changed, and how it ended. Before and After never hold a secret (no key
// hash or plaintext, no upstream secret): the admin API fills them with the
// views it shows operators.
type AuditEntry struct {
	ID      int64           // assigned by AppendAudit
	At      time.Time       // when the write was answered
	TokenID string          // the admin token's ID, never its secret
	Remote  string          // the caller's IP address
	Method  string          // HTTP method
	Path    string          // request path, without the query
	Action  string          // short name, e.g. "keys.disable"
	Targets []string        // IDs of what the write named or changed
	Status  int             // HTTP status answered
	Error   string          // the error code when Status >= 400
	Before  json.RawMessage // JSON object: target ID → its state before; nil when none
	After   json.RawMessage // JSON object: target ID → its state after; nil when none
}

// AuditFilter selects audit entries. Zero fields select everything.
type AuditFilter struct {
	Since  time.Time // entries at or after this instant
	Action string    // entries with this action
	Target string    // entries naming this target ID
	Limit  int       // at most this many; 0 = no limit
}
