// Package authn turns the token a caller presents into a principal, and
// manages the life of virtual keys (create, disable, enable, revoke, rotate,
// expire). Keys are stored only as a SHA-256 hash and a display prefix; the
// plaintext exists once, in the answer to create or rotate. Lookups read an
// in-memory index, never the store. It also keeps the suspended billing
// accounts and tenants in memory, read with the keys, and refuses every
// token once that view is older than its bound (FailClosed). It depends on
// package sluice and the catalog interfaces only.
package authn

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/periodic"
)

// KeyPrefix starts every virtual key Sluice issues.
const KeyPrefix = "sk-sluice-"

// secretLen is the number of base62 characters after KeyPrefix: 43 characters
// carry ~256 bits, so an unsalted SHA-256 cannot be brute-forced and is a
// safe way to store the key.
const secretLen = 43

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// errUnauthenticated is the one answer for every token that does not map to
// an active key, so a caller cannot tell unknown from disabled or expired.
var errUnauthenticated = &sluice.Error{Code: sluice.CodeNoCredentials, Msg: "invalid or missing API key"}

// NewSecret returns a fresh plaintext virtual key.
func NewSecret() string {
	var b strings.Builder
	b.Grow(len(KeyPrefix) + secretLen)
	b.WriteString(KeyPrefix)
	buf := make([]byte, 64)
	for b.Len() < len(KeyPrefix)+secretLen {
		rand.Read(buf) // never fails (crypto/rand panics instead)
		for _, c := range buf {
			if c < 248 && b.Len() < len(KeyPrefix)+secretLen { // 248 = 4*62: no modulo bias
				b.WriteByte(base62[c%62])
			}
		}
	}
	return b.String()
}

// Hash is the stored form of a key: hex SHA-256 of the plaintext.
func Hash(secret string) string {
	var h hashText
	return string(h.of(secret))
}

// hashText holds a Hash without allocating one: Authenticate looks the
// keyring up with it on every request.
type hashText [2 * sha256.Size]byte

// of fills h with the hash of secret and returns it as a slice of h.
func (h *hashText) of(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	hex.Encode(h[:], sum[:])
	return h[:]
}

// DisplayPrefix is the part of a key shown in listings: enough to recognise
// it, far too little to use it.
func DisplayPrefix(secret string) string {
	const n = len(KeyPrefix) + 4
	if len(secret) <= n {
		return "****"
	}
	return secret[:n] + "…"
}

// Keyring authenticates tokens and manages stored keys. Static keys come from
// the catalog and are replaced on each reload; stored keys come from a
// catalog.Keys store and are re-read on every change made through the
// Keyring and by Refresh. Safe for concurrent use.
type Keyring struct {
	store  catalog.Keys
	now    func() time.Time
	static atomic.Pointer[map[string]*sluice.Key] // by hash
	stored atomic.Pointer[map[string]*sluice.Key] // by hash
	byID   atomic.Pointer[map[string]*sluice.Key]
	mu     sync.Mutex    // serialises writes so a refresh never publishes a stale view over a newer one
	last   []*sluice.Key // the stored keys published last, ordered as ListKeys; guarded by mu
	// check and publish are set once, before use (see Follow).
	check   func(*sluice.Key) error
	publish func([]*sluice.Key)

	suspensions catalog.Suspensions            // set once, before use (TrackSuspensions); nil = none
	suspended   atomic.Pointer[suspensionView] // published with the keys
	refreshed   atomic.Int64                   // Unix nanoseconds of the last successful refresh; 0 = none
	staleness   func() time.Duration           // set once, before use (FailClosed); nil = never stale
}

// NewKeyring returns a Keyring over store, with no keys loaded; call Refresh.
func NewKeyring(store catalog.Keys) *Keyring {
	kr := &Keyring{store: store, now: time.Now}
	empty := map[string]*sluice.Key{}
	kr.static.Store(&empty)
	kr.stored.Store(&empty)
	kr.byID.Store(&empty)
	kr.suspended.Store(&suspensionView{})
	return kr
}

// Follow connects the keyring to the catalog serving requests, before the
// first Refresh. check validates a key about to be saved against that
// catalog (by the catalog's own rules for keys) and may fill its defaults;
// its error is shown to the operator. publish receives every stored key
// whenever they change, before they authenticate anything, so that what
// requests read (the compiled snapshot) never lags behind authentication.
// Either may be nil.
func (kr *Keyring) Follow(check func(*sluice.Key) error, publish func([]*sluice.Key)) {
	kr.check, kr.publish = check, publish
}

// SetStatic replaces the catalog's static keys. The caller hashed them.
func (kr *Keyring) SetStatic(keys []*sluice.Key) {
	m := make(map[string]*sluice.Key, len(keys))
	for _, k := range keys {
		m[k.Hash] = k
	}
	kr.static.Store(&m)
}

// Authenticate maps a presented token to its principal. Every failure is the
// same no_credentials error, except that while the view is stale (see
// FailClosed) every token is refused with state_unavailable.
func (kr *Keyring) Authenticate(token string) (*sluice.Principal, error) {
	now := kr.now()
	if kr.stale(now) {
		return nil, errStale
	}
	if token == "" {
		return nil, errUnauthenticated
	}
	var h hashText
	hash := h.of(token)
	k, ok := (*kr.stored.Load())[string(hash)] // looked up without a copy
	if !ok {
		k, ok = (*kr.static.Load())[string(hash)]
	}
	if !ok || k.EffectiveStatus(now) != sluice.KeyActive {
		return nil, errUnauthenticated
	}
	return &sluice.Principal{Key: k}, nil
}

// Refresh re-reads every stored key and suspension, so changes made by
// another replica become visible.
func (kr *Keyring) Refresh(ctx context.Context) error {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	return kr.refreshLocked(ctx)
}

func (kr *Keyring) refreshLocked(ctx context.Context) error {
	keys, err := kr.store.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("refresh keys: %w", err)
	}
	suspended, err := kr.readSuspensions(ctx)
	if err != nil {
		return err
	}
	kr.suspended.Store(&suspended)
	defer kr.refreshed.Store(kr.now().UnixNano())
	if slices.EqualFunc(keys, kr.last, same) {
		return nil // nothing to recompile: most refreshes find no change
	}
	if kr.publish != nil {
		kr.publish(keys)
	}
	kr.last = keys
	byHash := make(map[string]*sluice.Key, len(keys))
	byID := make(map[string]*sluice.Key, len(keys))
	for _, k := range keys {
		byHash[k.Hash] = k
		byID[k.ID] = k
	}
	kr.stored.Store(&byHash)
	kr.byID.Store(&byID)
	return nil
}

// same reports whether a and b are one version of one key: every write
// through the Keyring moves UpdatedAt.
func same(a, b *sluice.Key) bool {
	return a.ID == b.ID && a.UpdatedAt.Equal(b.UpdatedAt) && a.Hash == b.Hash && a.Status == b.Status
}

// Run refreshes the stored keys and suspensions every interval until ctx
// ends; onErr receives each failed refresh.
func (kr *Keyring) Run(ctx context.Context, interval time.Duration, onErr func(error)) {
	periodic.Run(ctx, interval, func(ctx context.Context) {
		if err := kr.Refresh(ctx); err != nil && ctx.Err() == nil {
			onErr(err)
		}
	})
}

// Create stores a new key and returns it with its plaintext, which is never
// available again. k is what the operator chose: its ID (generated when
// empty), name, tenant, models, priority, expiry and settings, and Status
// KeyPending to create it pending (Enable activates it); the keyring sets
// the rest, and the check given to Follow fills the defaults.
func (kr *Keyring) Create(ctx context.Context, chosen sluice.Key) (*sluice.Key, string, error) {
	secret := NewSecret()
	now := kr.now().UTC()
	k := &chosen
	k.Hash, k.Prefix, k.Static = Hash(secret), DisplayPrefix(secret), false
	k.CreatedAt, k.UpdatedAt = now, now
	if k.ID == "" {
		k.ID = "key_" + NewSecret()[len(KeyPrefix):len(KeyPrefix)+16]
	}
	if k.Status != sluice.KeyPending {
		k.Status = sluice.KeyActive
	}
	if err := kr.checked(k); err != nil {
		return nil, "", err
	}
	kr.mu.Lock()
	defer kr.mu.Unlock()
	if kr.staticKey(k.ID) != nil {
		return nil, "", fmt.Errorf("key %s: %w with a key of the catalog", k.ID, catalog.ErrConflict)
	}
	if _, err := kr.store.LoadKey(ctx, k.ID); err == nil {
		return nil, "", fmt.Errorf("key %s: %w", k.ID, catalog.ErrConflict)
	}
	if err := kr.store.SaveKey(ctx, k); err != nil {
		return nil, "", fmt.Errorf("create key %s: %w", k.ID, err)
	}
	return k, secret, kr.refreshLocked(ctx)
}

// ErrTransition is returned for a state change a key's status does not allow
// (for example enabling a revoked key).
var ErrTransition = errors.New("transition not allowed")

// ErrStatic is returned for a change to a key declared in the catalog: the
// catalog is where it changes.
var ErrStatic = errors.New("declared in the catalog")

// checked runs the catalog's check on k, as a public invalid_request error.
func (kr *Keyring) checked(k *sluice.Key) error {
	if kr.check == nil {
		return nil
	}
	if err := kr.check(k); err != nil {
		return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: err.Error(), Err: err}
	}
	return nil
}

// Check runs on k the check Update runs before it saves a change, with the
// same error: a dry run of a change shows the refusal the change would get.
// It may fill k's defaults; k should be the caller's copy.
func (kr *Keyring) Check(k *sluice.Key) error { return kr.checked(k) }

// staticKey returns the catalog's key with the ID, or nil.
func (kr *Keyring) staticKey(id string) *sluice.Key {
	for _, k := range *kr.static.Load() {
		if k.ID == id {
			return k
		}
	}
	return nil
}

// Disable stops a key from authenticating until it is enabled again.
func (kr *Keyring) Disable(ctx context.Context, id string) (*sluice.Key, error) {
	return kr.update(ctx, id, func(k *sluice.Key) error {
		if k.Status == sluice.KeyRevoked {
			return ErrTransition
		}
		k.Status = sluice.KeyDisabled
		return nil
	})
}

// Enable makes a disabled or pending key active. It does not lift an expiry.
func (kr *Keyring) Enable(ctx context.Context, id string) (*sluice.Key, error) {
	return kr.update(ctx, id, func(k *sluice.Key) error {
		if k.Status == sluice.KeyRevoked {
			return ErrTransition
		}
		k.Status = sluice.KeyActive
		return nil
	})
}

// Revoke ends a key for good.
func (kr *Keyring) Revoke(ctx context.Context, id string) (*sluice.Key, error) {
	return kr.update(ctx, id, func(k *sluice.Key) error {
		k.Status = sluice.KeyRevoked
		return nil
	})
}

// Expire sets when the key stops working; a zero time removes the expiry.
func (kr *Keyring) Expire(ctx context.Context, id string, at time.Time) (*sluice.Key, error) {
	return kr.update(ctx, id, func(k *sluice.Key) error {
		if k.Status == sluice.KeyRevoked {
			return ErrTransition
		}
		k.ExpiresAt = at
		return nil
	})
}

// SetModels replaces the aliases the key may use (empty = all).
func (kr *Keyring) SetModels(ctx context.Context, id string, models []string) (*sluice.Key, error) {
	return kr.Update(ctx, id, func(k *sluice.Key) error {
		k.Models = models
		return nil
	})
}

// Update changes what a stored key carries — its name, scopes, labels,
// policy, limits, task types, on_limit — through change, then checks the
// result by the catalog's rules before it saves it. change must not touch
// the key's ID, secret or status; an error from it is returned as it is.
func (kr *Keyring) Update(ctx context.Context, id string, change func(*sluice.Key) error) (*sluice.Key, error) {
	return kr.update(ctx, id, func(k *sluice.Key) error {
		if err := change(k); err != nil {
			return err
		}
		return kr.checked(k)
	})
}

// Rotate gives the key a new plaintext; the old one stops working at once.
func (kr *Keyring) Rotate(ctx context.Context, id string) (*sluice.Key, string, error) {
	secret := NewSecret()
	k, err := kr.update(ctx, id, func(k *sluice.Key) error {
		if k.Status == sluice.KeyRevoked {
			return ErrTransition
		}
		k.Hash = Hash(secret)
		k.Prefix = DisplayPrefix(secret)
		return nil
	})
	if k == nil {
		return nil, "", err
	}
	// A failed refresh after a successful save still rotated the key: the
	// caller must get the new plaintext, or nobody ever could.
	return k, secret, err
}

// Load returns the key with the ID: the catalog's, or a stored one.
func (kr *Keyring) Load(ctx context.Context, id string) (*sluice.Key, error) {
	if k := kr.staticKey(id); k != nil {
		return k, nil
	}
	return kr.store.LoadKey(ctx, id)
}

// List returns every key: the catalog's first (Static, ordered by ID),
// then the stored ones. The catalog's keys are shared: do not change them.
func (kr *Keyring) List(ctx context.Context) ([]*sluice.Key, error) {
	stored, err := kr.store.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	static := slices.Collect(maps.Values(*kr.static.Load()))
	slices.SortFunc(static, func(a, b *sluice.Key) int { return strings.Compare(a.ID, b.ID) })
	return append(static, stored...), nil
}

// ListAfter returns up to limit keys in List's order from the one after
// the key with the ID after ("": from the first), and how many keys List
// would return: the static keys from memory, the stored ones a page at a
// time from the store. It returns an error wrapping catalog.ErrNotFound
// when no key has the ID after.
func (kr *Keyring) ListAfter(ctx context.Context, after string, limit int) ([]*sluice.Key, int, error) {
	static := slices.Collect(maps.Values(*kr.static.Load()))
	slices.SortFunc(static, func(a, b *sluice.Key) int { return strings.Compare(a.ID, b.ID) })
	var page []*sluice.Key // the static keys of the page, before any stored one
	storedAfter := after
	if i := slices.IndexFunc(static, func(k *sluice.Key) bool { return k.ID == after }); after == "" || i >= 0 {
		end := min(i+1+limit, len(static)) // i is -1 for after ""
		page = static[i+1 : end : end]
		storedAfter = ""
	}
	stored, total, err := kr.store.ListKeysAfter(ctx, storedAfter, max(limit-len(page), 0))
	if err != nil {
		return nil, 0, err
	}
	return append(page, stored...), len(static) + total, nil
}

func (kr *Keyring) update(ctx context.Context, id string, change func(*sluice.Key) error) (*sluice.Key, error) {
	if kr.staticKey(id) != nil {
		return nil, fmt.Errorf("key %s is %w: change it there", id, ErrStatic)
	}
	kr.mu.Lock()
	defer kr.mu.Unlock()
	k, err := kr.store.LoadKey(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", id, err)
	}
	if err := change(k); err != nil {
		if _, public := errors.AsType[*sluice.Error](err); public {
			return nil, err
		}
		return nil, fmt.Errorf("key %s is %s: %w", id, k.Status, err)
	}
	k.UpdatedAt = kr.now().UTC()
	if err := kr.store.SaveKey(ctx, k); err != nil {
		return nil, fmt.Errorf("save key %s: %w", id, err)
	}
	return k, kr.refreshLocked(ctx)
}
