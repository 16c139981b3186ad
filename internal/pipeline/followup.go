package pipeline

import (
	"cmp"
	"context"
	"errors"
	"io"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/upstream"
)

// Follow-ups (GET, cancel or delete of a stored response; a caller's
// status, result or cancel of a job) go to the upstream on the key's
// behalf like its requests do, so they answer to the same rules: the key
// must still be active and scoped to the path (keys[].paths) and the
// alias, and each takes a light claim before it is sent. Light means: a
// slot of the bound account's (and credential's) max_inflight for as long
// as the follow-up runs (a stream to its end), and one request of the
// key's and its tenant's max_inflight and rpm; no tokens are reserved
// anywhere, and the account's rpm, tpm and daily limits are not counted
// (a follow-up generates nothing; the upstream's request limits are its
// model calls'). Without room the follow-up waits in its alias's queue as
// a request of its key would, up to its class's wait, and is then refused
// with capacity_wait_timeout — or at once with access_concurrency_exceeded
// for a key that refuses at its own max_inflight. An answer Sluice gives
// from its own record (a job's recorded status) takes nothing.

// admitFollowUp checks that key k may follow up a binding of protocol p
// for alias (alias "" = not known yet, checked again when it is): the key
// still active as it authenticated, scoped to p's path and to the alias.
func admitFollowUp(snap *Snapshot, k *sluice.Key, p sluice.Protocol, alias string) error {
	kp, ok := snap.keyActive(k, time.Now())
	if !ok {
		return errKeyInactive
	}
	k = kp.key
	if path, ok := k.MayCall(p, false); !ok {
		return &sluice.Error{Code: sluice.CodeScopeDenied, Msg: "this key may not call " + path}
	}
	if alias != "" && !k.Allows(alias) {
		return &sluice.Error{Code: sluice.CodeScopeDenied, Msg: "this key may not use model " + alias}
	}
	return nil
}

// claimFollowUp takes the light claim of a follow-up (req, of key k) of
// binding b, to be sent on edge e, rebuilt from b.
func (h *Handler) claimFollowUp(ctx context.Context, snap *Snapshot, k *sluice.Key, req *sluice.Request, b *store.Job, e *sluice.Edge) (*capacity.Claim, error) {
	if err := admitFollowUp(snap, k, req.Protocol, b.Alias); err != nil {
		return nil, err
	}
	req.Model = b.Alias
	c := snap.candidate(e.Account, e.Credential)
	c.Unit.RPM, c.Unit.TPM, c.Unit.DailyTokens, c.Unit.DailyRequests = 0, 0, 0, 0
	for _, id := range [...]string{"key:" + k.ID, "tenant:" + k.Tenant} {
		if u, ok := snap.limits[id]; ok {
			u.TPM, u.DailyTokens = 0, 0
			c.Limits = append(c.Limits, u)
		}
	}
	c.Limits = snap.placeLimits(c.Limits)
	domain := cmp.Or(snap.UnitDomain(c.Unit.ID), snap.AliasDomain(b.Alias))
	task, _ := snap.Task(k, req.Task)
	class := snap.class(k, task, req.Profile, req.Priority)
	acq := store.Acquire{Ticket: req.ID + ".follow", Queue: b.Alias, Class: class, Tenant: k.Tenant, Weight: snap.Weight(k.Tenant)}
	deadline := time.Now().Add(waitFor(snap.Wait(class), req))
	claim, err := h.capacity.Wait(ctx, acq, deadline, func() (string, []store.Candidate) {
		return domain, []store.Candidate{c}
	})
	if errors.Is(err, capacity.ErrRefused) {
		return nil, errConcurrencyExceeded
	}
	return claim, err
}

// releaseFollowUp releases the claim of a follow-up that ran as attempt
// a. A follow-up's success proves nothing of the account's model calls:
// it neither resets a backoff nor opens a cooling account (a probe it
// was granted passes to the next request); a rate limit it met cools the
// account as any would.
func releaseFollowUp(ctx context.Context, claim *capacity.Claim, a upstream.Attempt) {
	out := outcome(a)
	out.Success, out.Tokens = false, 0
	claim.Release(context.WithoutCancel(ctx), out)
}

// releasingBody is an answer body passed on as it arrives whose
// follow-up holds its claim until the body is closed.
type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}
