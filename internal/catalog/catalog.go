// Package catalog defines the durable records of what Sluice serves and who
// may call it: virtual keys and the applied catalog document. Implementations
// live in memcatalog (tests, single process) and sqlcatalog (SQLite,
// PostgreSQL); catalogtest holds the contract suite both must pass. This
// package depends only on package sluice.
package catalog

import (
	"context"
	"errors"

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
