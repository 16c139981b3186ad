package catalogtest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/catalog"
)

func runSuspensions(t *testing.T, open func(t *testing.T) Store) {
	suspension := func(kind catalog.SuspensionKind, id, reason string, minute int) catalog.Suspension {
		return catalog.Suspension{Kind: kind, ID: id, Reason: reason, Since: at(minute), By: "ops"}
	}
	list := func(t *testing.T, s Store) []catalog.Suspension {
		t.Helper()
		got, err := s.ListSuspensions(t.Context())
		if err != nil {
			t.Fatalf("ListSuspensions: %v", err)
		}
		return got
	}
	suspend := func(t *testing.T, s Store, sp catalog.Suspension) {
		t.Helper()
		if err := s.Suspend(t.Context(), sp); err != nil {
			t.Fatalf("Suspend(%s %s): %v", sp.Kind, sp.ID, err)
		}
	}

	t.Run("EmptyListsNone", func(t *testing.T) {
		if got := list(t, open(t)); len(got) != 0 {
			t.Errorf("ListSuspensions of an empty store = %v, want none", got)
		}
	})

	t.Run("ListsByKindThenID", func(t *testing.T) {
		s := open(t)
		// A tenant and a billing account may share an ID: they are two subjects.
		suspend(t, s, suspension(catalog.SuspendedTenant, "acme", "abuse", 1))
		suspend(t, s, suspension(catalog.SuspendedBillingAccount, "zeta", "unpaid", 2))
		suspend(t, s, suspension(catalog.SuspendedBillingAccount, "acme", "unpaid invoice 7", 3))
		want := []catalog.Suspension{
			suspension(catalog.SuspendedBillingAccount, "acme", "unpaid invoice 7", 3),
			suspension(catalog.SuspendedBillingAccount, "zeta", "unpaid", 2),
			suspension(catalog.SuspendedTenant, "acme", "abuse", 1),
		}
		if diff := cmp.Diff(want, list(t, s), keyOpts); diff != "" {
			t.Errorf("ListSuspensions (-want +got):\n%s", diff)
		}
	})

	t.Run("SuspendAgainReplaces", func(t *testing.T) {
		s := open(t)
		suspend(t, s, suspension(catalog.SuspendedTenant, "acme", "first", 1))
		second := suspension(catalog.SuspendedTenant, "acme", "second", 5)
		second.By = "oncall"
		suspend(t, s, second)
		if diff := cmp.Diff([]catalog.Suspension{second}, list(t, s), keyOpts); diff != "" {
			t.Errorf("after a second Suspend (-want +got):\n%s", diff)
		}
	})

	t.Run("ResumeRemovesOnlyItsSubject", func(t *testing.T) {
		s := open(t)
		suspend(t, s, suspension(catalog.SuspendedTenant, "acme", "abuse", 1))
		suspend(t, s, suspension(catalog.SuspendedBillingAccount, "acme", "unpaid", 2))
		had, err := s.Resume(t.Context(), catalog.SuspendedTenant, "acme")
		if err != nil || !had {
			t.Fatalf("Resume(tenant acme) = %v, %v; want true, nil", had, err)
		}
		want := []catalog.Suspension{suspension(catalog.SuspendedBillingAccount, "acme", "unpaid", 2)}
		if diff := cmp.Diff(want, list(t, s), keyOpts); diff != "" {
			t.Errorf("after Resume (-want +got):\n%s", diff)
		}
		had, err = s.Resume(t.Context(), catalog.SuspendedTenant, "acme")
		if err != nil || had {
			t.Errorf("Resume of a subject not suspended = %v, %v; want false, nil", had, err)
		}
	})

	t.Run("SinceComesBackInUTC", func(t *testing.T) {
		s := open(t)
		suspend(t, s, suspension(catalog.SuspendedTenant, "acme", "abuse", 1))
		if got := list(t, s)[0].Since; got.Location() != time.UTC || !got.Equal(at(1)) {
			t.Errorf("Since = %v, want %v in UTC", got, at(1))
		}
	})
}
