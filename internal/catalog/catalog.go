// Package catalog defines the durable records of what Sluice serves and who
// may call it: virtual keys, the numbered versions of the applied catalog
// document, the heartbeats of the replicas serving them, and the audit log
// of the admin writes that changed them. Implementations live in
// memcatalog (tests, single process) and sqlcatalog (SQLite, PostgreSQL);
// catalogtest holds the contract suite both must pass. This package
// depends only on package sluice and a line-diff module.
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
	// ListKeysAfter returns up to limit stored keys in ListKeys' order,
	// from the one after the key with the ID after ("": from the first),
	// and how many keys are stored. It returns ErrNotFound when no key has
	// the ID after.
	ListKeysAfter(ctx context.Context, after string, limit int) (keys []*sluice.Key, total int, err error)
}

// Documents stores every catalog document applied through the admin API as
// a numbered version, so a restart serves what the operators applied, every
// replica on the database can follow the latest, and any earlier one can be
// read back or restored. Versions start at 1 and grow by one per save;
// history is append-only (a rollback saves a new version). Safe for
// concurrent use, also by several processes sharing one database.
type Documents interface {
	// SaveCatalog stores next.Doc as the next version, noting next.By and
	// next.RollbackOf, if the current version is ifVersion (0 = no check);
	// otherwise it returns ErrConflict. It returns the version as stored:
	// its number, time, size and diff against the previous version.
	SaveCatalog(ctx context.Context, next CatalogVersion, ifVersion int64) (CatalogVersion, error)
	// LoadCatalog returns the latest document, or ErrNotFound when none was saved.
	LoadCatalog(ctx context.Context) (doc []byte, version int64, err error)
	// LoadCatalogVersion returns the version with its document and diff,
	// or ErrNotFound.
	LoadCatalogVersion(ctx context.Context, version int64) (CatalogVersion, error)
	// ListCatalogVersions returns up to limit versions (0 = all), newest
	// first, without their documents and diffs.
	ListCatalogVersions(ctx context.Context, limit int) ([]CatalogVersion, error)
	// LatestCatalogVersion returns the latest version's number, 0 when none
	// was saved. It is what replicas poll, so it must stay cheap.
	LatestCatalogVersion(ctx context.Context) (int64, error)
}

// CatalogVersion is one stored catalog document and how it came to be.
type CatalogVersion struct {
	Version    int64     // assigned by SaveCatalog
	At         time.Time // when it was saved; set by SaveCatalog
	By         string    // the admin token's ID that saved it, never its secret; "" = unknown
	RollbackOf int64     // the version whose document it restores; 0 = a new document
	Bytes      int       // the document's size; set by SaveCatalog
	// LinesAdded and LinesRemoved count the lines of Diff; set by SaveCatalog.
	LinesAdded, LinesRemoved int
	Doc                      []byte // the YAML; empty in ListCatalogVersions
	// Diff is the unified diff from the previous version (from nothing for
	// version 1), set by SaveCatalog; empty in ListCatalogVersions, and for
	// versions stored before versions had diffs.
	Diff string
}

// Replicas is the heartbeat table of the gateways sharing a database: each
// writes its row about once a second, and any of them lists those seen
// lately. Safe for concurrent use, also by several processes.
type Replicas interface {
	// BeatReplica inserts or replaces the row of r.ID.
	BeatReplica(ctx context.Context, r Replica) error
	// ListReplicas returns the replicas seen at or after since, ordered by ID.
	ListReplicas(ctx context.Context, since time.Time) ([]Replica, error)
	// PruneReplicas deletes the rows last seen before before and returns
	// how many it deleted.
	PruneReplicas(ctx context.Context, before time.Time) (int, error)
}

// Replica is one gateway process as its heartbeat describes it. Times are
// kept to the microsecond and come back in UTC.
type Replica struct {
	ID          string    // stable for the life of the process
	Source      string    // where its catalog comes from: "store", "file:/path", "demo"
	Version     int64     // the stored catalog version it serves; 0 = its catalog is not a stored one
	Since       time.Time // when it began serving what it serves
	LastError   string    // why the latest change it tried did not load; "" = none
	LastErrorAt time.Time // zero when LastError is ""
	SeenAt      time.Time // its last heartbeat
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
