// Package history checks store.Claims implementations against the
// reference model of package storemodel on seeded random histories: it
// generates operation sequences (acquires with random units, limits,
// classes, tenants and tokens; releases with random outcomes; renewals,
// cancels, probe successes, reassertions, inspections, a shared store
// losing its state or becoming unreachable, and a fake clock moved
// forward),
// runs each step against the model and a store driven by the same clock,
// and compares every grant, refusal, queue position, retry time, required
// wake-up and unit state. A failing history is shrunk to a minimal one and
// printed as Go, ready to paste as a regression case (see Replay).
//
// It is imported by tests only and depends on package store, storemodel
// and the standard library, never on an implementation.
package history

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// Kind is what an Op does.
type Kind int

// The operations of a history.
const (
	Acquire  Kind = iota // Op.Acquire (a new ticket, or a waiter asking again)
	Release              // Op.Domain, Op.Lease, Op.Out
	Renew                // Op.Domain, Op.Lease, Op.TTL
	Cancel               // Op.Domain, Op.Queue, Op.Lease (the ticket)
	Probe                // ProbeSucceeded of Op.Domain, Op.Lease
	Advance              // the clock moves on by Op.Step
	Inspect              // Units and CredentialInFlight of every unit and credential of Op.Domain
	Reassert             // Op.Held in Op.Domain (skipped while its ticket is queued: no replica holds a lease of a waiting ticket)
	Lose                 // the shared store loses Op.Domain's state; the live leases are reasserted
	Outage               // the shared store is unreachable from now on: a degraded store decides locally
)

var kindNames = [...]string{"Acquire", "Release", "Renew", "Cancel", "Probe", "Advance", "Inspect", "Reassert", "Lose", "Outage"}

func (k Kind) String() string { return kindNames[k] }

// Op is one step of a history. Each op carries all it needs, so any
// subsequence of a history is a history too (which shrinking relies on).
type Op struct {
	Kind    Kind
	Acquire store.Acquire
	Domain  string
	Lease   string // the lease, or the ticket for Cancel
	Queue   string
	Out     store.Outcome
	TTL     time.Duration
	Step    time.Duration
	Held    store.Held
}

// GoString prints op as a Go literal of package history_test's view.
func (op Op) GoString() string {
	switch op.Kind {
	case Acquire:
		return fmt.Sprintf("{Kind: history.Acquire, Acquire: %#v}", op.Acquire)
	case Release:
		return fmt.Sprintf("{Kind: history.Release, Domain: %q, Lease: %q, Out: %#v}", op.Domain, op.Lease, op.Out)
	case Renew:
		return fmt.Sprintf("{Kind: history.Renew, Domain: %q, Lease: %q, TTL: %d}", op.Domain, op.Lease, op.TTL)
	case Cancel:
		return fmt.Sprintf("{Kind: history.Cancel, Domain: %q, Queue: %q, Lease: %q}", op.Domain, op.Queue, op.Lease)
	case Probe:
		return fmt.Sprintf("{Kind: history.Probe, Domain: %q, Lease: %q}", op.Domain, op.Lease)
	case Advance:
		return fmt.Sprintf("{Kind: history.Advance, Step: %d}", op.Step)
	case Reassert:
		return fmt.Sprintf("{Kind: history.Reassert, Domain: %q, Held: %#v}", op.Domain, op.Held)
	case Lose:
		return fmt.Sprintf("{Kind: history.Lose, Domain: %q}", op.Domain)
	case Outage:
		return "{Kind: history.Outage}"
	default:
		return fmt.Sprintf("{Kind: history.Inspect, Domain: %q}", op.Domain)
	}
}

// Format prints ops as the body of a []history.Op literal.
func Format(ops []Op) string {
	var b strings.Builder
	b.WriteString("[]history.Op{\n")
	for _, op := range ops {
		fmt.Fprintf(&b, "\t%#v,\n", op)
	}
	b.WriteString("}")
	return b.String()
}
