package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/authn"
)

// Batch is the body of POST /admin/keys/batch: one operation on every key
// whose labels Selector matches.
type Batch struct {
	Selector  string     `json:"selector"`         // label selector, required (e.g. team=web,env!=prod)
	Operation string     `json:"operation"`        // disable | enable | set_policy | set_limits | set_billing_account
	Policy    *KeyPolicy `json:"policy,omitempty"` // the policy set_policy gives every key
	Limits    *KeyLimits `json:"limits,omitempty"` // the limits set_limits gives every key
	// BillingAccount is the billing account set_billing_account binds
	// every key to ("" unbinds them).
	BillingAccount *string `json:"billing_account,omitempty"`
	// DryRun changes nothing and answers what the same batch would change
	// now: run again without it, the answer is the same.
	DryRun bool `json:"dry_run,omitempty"`
}

// BatchResult answers a batch: the keys it changed (in a dry run, would
// change) with each changed field before and after, the keys already as
// asked, and the keys it may not change, with why.
type BatchResult struct {
	Selector  string       `json:"selector"` // canonical form
	Operation string       `json:"operation"`
	DryRun    bool         `json:"dry_run"`
	Changed   []KeyDiff    `json:"changed"`
	Unchanged []string     `json:"unchanged"`
	Skipped   []SkippedKey `json:"skipped"`
}

// KeyDiff is what a batch changes on one key: each field of its KeyRecord
// that differs (updated_at aside).
type KeyDiff struct {
	ID     string                 `json:"id"`
	Fields map[string]FieldChange `json:"fields"`
}

// FieldChange is one field of a KeyRecord before and after a change.
type FieldChange struct {
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// SkippedKey is a matched key a batch may not change.
type SkippedKey struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Batch operations.
const (
	BatchDisable   = "disable"
	BatchEnable    = "enable"
	BatchSetPolicy = "set_policy"
	BatchSetLimits = "set_limits"
	// BatchSetBillingAccount binds keys to a billing account.
	BatchSetBillingAccount = "set_billing_account"
)

// batchOp is one operation of a batch: preview makes its change to a copy
// of a key, exactly as apply makes it to the stored key.
type batchOp struct {
	preview func(k *sluice.Key) error
	apply   func(ctx context.Context, id string) (*sluice.Key, error)
}

// op returns the operation b asks for, checking that it names what it needs.
func (b *Batch) op(kr *authn.Keyring) (batchOp, error) {
	status := func(to sluice.KeyStatus, apply func(context.Context, string) (*sluice.Key, error)) batchOp {
		return batchOp{preview: func(k *sluice.Key) error {
			if k.Status == sluice.KeyRevoked { // Keyring.Disable and Enable refuse the same
				return fmt.Errorf("key %s is %s: %w", k.ID, k.Status, authn.ErrTransition)
			}
			k.Status = to
			return nil
		}, apply: apply}
	}
	settings := func(c KeyChange) batchOp {
		return batchOp{
			preview: func(k *sluice.Key) error {
				if err := c.Apply(k); err != nil {
					return err
				}
				return kr.Check(k)
			},
			apply: func(ctx context.Context, id string) (*sluice.Key, error) { return kr.Update(ctx, id, c.Apply) },
		}
	}
	if (b.Policy != nil) != (b.Operation == BatchSetPolicy) || (b.Limits != nil) != (b.Operation == BatchSetLimits) ||
		(b.BillingAccount != nil) != (b.Operation == BatchSetBillingAccount) {
		return batchOp{}, invalid("policy goes with the operation set_policy, limits with set_limits, billing_account with set_billing_account, and nothing else")
	}
	switch b.Operation {
	case BatchDisable:
		return status(sluice.KeyDisabled, kr.Disable), nil
	case BatchEnable:
		return status(sluice.KeyActive, kr.Enable), nil
	case BatchSetPolicy:
		return settings(KeyChange{Policy: b.Policy}), nil
	case BatchSetLimits:
		return settings(KeyChange{Limits: b.Limits}), nil
	case BatchSetBillingAccount:
		return settings(KeyChange{BillingAccount: b.BillingAccount}), nil
	}
	return batchOp{}, invalid("operation %q is not one of %s, %s, %s, %s, %s", b.Operation, BatchDisable, BatchEnable, BatchSetPolicy, BatchSetLimits, BatchSetBillingAccount)
}

// batchKeys handles POST /admin/keys/batch. It previews the operation on a
// copy of every matched key, then, unless it is a dry run, applies it to
// those the preview changes, one by one; the answer reports what the
// stored keys became. It notes its own audit entry.
func (s *server) batchKeys(w http.ResponseWriter, r *http.Request) error {
	var b Batch
	if err := decodeJSON(w, r, &b, false); err != nil {
		return err
	}
	sel, err := parseSelector(b.Selector)
	if err != nil {
		return err
	}
	op, err := b.op(s.keys)
	if err != nil {
		return err
	}
	keys, err := s.keys.List(r.Context())
	if err != nil {
		return err
	}
	res := BatchResult{Selector: sel.String(), Operation: b.Operation, DryRun: b.DryRun,
		Changed: []KeyDiff{}, Unchanged: []string{}, Skipped: []SkippedKey{}}
	before, after := map[string]KeyRecord{}, map[string]KeyRecord{}
	defer func() { s.noteBatch(w, &b, res.Changed, before, after) }()
	now := s.now()
	for _, k := range keys {
		if !sel.matches(k.Labels) {
			continue
		}
		if k.Static {
			res.Skipped = append(res.Skipped, SkippedKey{ID: k.ID, Reason: "declared in the catalog: change it there"})
			continue
		}
		c := *k // a shallow copy will do: the operations replace fields, never change them in place
		if err := op.preview(&c); err != nil {
			res.Skipped = append(res.Skipped, SkippedKey{ID: k.ID, Reason: reason(k.ID, err)})
			continue
		}
		was, fields := keyRecord(k, now), diffRecords(keyRecord(k, now), keyRecord(&c, now))
		if len(fields) == 0 {
			res.Unchanged = append(res.Unchanged, k.ID)
			continue
		}
		became := keyRecord(&c, now)
		if !b.DryRun {
			got, err := op.apply(r.Context(), k.ID)
			if err = s.stored(r.Context(), got, err); err != nil {
				if _, public := errors.AsType[*sluice.Error](keyError(k.ID, err)); !public {
					return err // the store failed: what is done so far is in the audit entry
				}
				res.Skipped = append(res.Skipped, SkippedKey{ID: k.ID, Reason: reason(k.ID, err)})
				continue
			}
			became = keyRecord(got, now)
			fields = diffRecords(was, became)
		}
		res.Changed = append(res.Changed, KeyDiff{ID: k.ID, Fields: fields})
		before[k.ID], after[k.ID] = was, became
	}
	s.wrote(r.Context(), "keys.batch", slog.String("operation", b.Operation), slog.String("selector", res.Selector),
		slog.Bool("dry_run", b.DryRun), slog.Int("changed", len(res.Changed)), slog.Int("skipped", len(res.Skipped)))
	writeJSON(w, http.StatusOK, res)
	return nil
}

// reason is why err keeps the key id from changing, as the operator may read it.
func reason(id string, err error) string {
	return asError(keyError(id, err)).Msg
}

// diffRecords returns each field of the KeyRecord JSON that differs between
// a and b, updated_at aside (a dry run cannot know it).
func diffRecords(a, b KeyRecord) map[string]FieldChange {
	fa, fb := recordFields(a), recordFields(b)
	out := map[string]FieldChange{}
	for name, va := range fa {
		if vb := fb[name]; name != "updated_at" && !bytes.Equal(va, vb) {
			out[name] = FieldChange{Before: nullIfAbsent(va), After: nullIfAbsent(vb)}
		}
	}
	for name, vb := range fb {
		if _, ok := fa[name]; !ok && name != "updated_at" {
			out[name] = FieldChange{Before: json.RawMessage("null"), After: vb}
		}
	}
	return out
}

// recordFields is the KeyRecord's JSON object, field by field.
func recordFields(r KeyRecord) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	b, _ := json.Marshal(r) // our own view type: it always encodes
	_ = json.Unmarshal(b, &m)
	return m
}

func nullIfAbsent(v json.RawMessage) json.RawMessage {
	if v == nil {
		return json.RawMessage("null")
	}
	return v
}

// noteBatch fills the batch's audit entry: the keys it changed, before and
// after. A dry run changes nothing, and says so in its action.
func (s *server) noteBatch(w http.ResponseWriter, b *Batch, changed []KeyDiff, before, after map[string]KeyRecord) {
	rec := recorderOf(w)
	if rec == nil {
		return
	}
	e := &rec.entry
	e.Action = "keys.batch." + b.Operation
	if b.DryRun {
		e.Action += ".dry_run"
		after = before
	}
	for _, d := range changed {
		e.Targets = append(e.Targets, d.ID)
	}
	slices.Sort(e.Targets)
	if len(before) > 0 {
		e.Before, _ = json.Marshal(before)
		e.After, _ = json.Marshal(after)
	}
}
