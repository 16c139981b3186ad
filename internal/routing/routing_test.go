package routing

import (
	"fmt"
	"math"
	"testing"

	"github.com/sluicehq/sluice"
)

// table builds an alias whose deployments have the given priority, weight and
// number of credentials; edge IDs are "d<deployment>c<credential>", and each
// credential is its own account of that ID, without a cap.
func table(s Strategy, deps ...[3]int) *Table {
	a := &sluice.Alias{Name: "fast", Protocols: []sluice.Protocol{chat}}
	var edges [][]*sluice.Edge
	for i, d := range deps {
		a.Deployments = append(a.Deployments, sluice.Deployment{Priority: d[0], Weight: d[1]})
		var es []*sluice.Edge
		for c := range d[2] {
			id := fmt.Sprintf("d%dc%d", i, c)
			es = append(es, &sluice.Edge{ID: id, Account: &sluice.Account{ID: id}})
		}
		edges = append(edges, es)
	}
	return Compile([]*sluice.Alias{a}, map[string]Edges{"fast": {chat: edges}}, map[string]Strategy{"fast": s})
}

const chat = sluice.ProtocolOpenAIChat

func ids(es []*sluice.Edge) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func TestTiersInPriorityOrder(t *testing.T) {
	for name, s := range strategies {
		t.Run(name, func(t *testing.T) {
			tb := table(s, [3]int{1, 1, 1}, [3]int{0, 1, 1}, [3]int{2, 1, 1})
			got, ok := tb.Candidates("fast", chat, nil)
			if want := "[d1c0 d0c0 d2c0]"; !ok || fmt.Sprint(ids(got)) != want {
				t.Errorf("Candidates = %v, want %s", ids(got), want)
			}
		})
	}
}

func TestRoundRobinOverCredentials(t *testing.T) {
	tb := table(nil, [3]int{0, 1, 3})
	var firsts []string
	for range 4 {
		got, _ := tb.Candidates("fast", chat, nil)
		if len(got) != 3 {
			t.Fatalf("Candidates = %v, want every credential", ids(got))
		}
		firsts = append(firsts, got[0].ID)
	}
	if want := "[d0c0 d0c1 d0c2 d0c0]"; fmt.Sprint(firsts) != want {
		t.Errorf("first candidates = %v, want %s", firsts, want)
	}
}

// TestWeightsInsideATier checks that the weighted strategies put a
// deployment first in proportion to its weight, and spread a deployment's
// share evenly over its credentials.
func TestWeightsInsideATier(t *testing.T) {
	for _, name := range []string{"round-robin", "weighted"} {
		t.Run(name, func(t *testing.T) {
			tb := table(strategies[name], [3]int{0, 3, 2}, [3]int{0, 1, 1})
			const n = 20000
			first := map[string]int{}
			for range n {
				got, _ := tb.Candidates("fast", chat, nil)
				if len(got) != 3 {
					t.Fatalf("Candidates = %v, want every edge", ids(got))
				}
				first[got[0].ID]++
			}
			for id, want := range map[string]float64{"d0c0": 0.375, "d0c1": 0.375, "d1c0": 0.25} {
				if share := float64(first[id]) / n; math.Abs(share-want) > 0.02 {
					t.Errorf("%s first in %.3f of requests, want %.3f±0.02", id, share, want)
				}
			}
		})
	}
}

func TestFillFirstKeepsCatalogOrder(t *testing.T) {
	tb := table(FillFirst{}, [3]int{0, 1, 2}, [3]int{0, 5, 2})
	for range 5 {
		got, _ := tb.Candidates("fast", chat, nil)
		if want := "[d0c0 d0c1 d1c0 d1c1]"; fmt.Sprint(ids(got)) != want {
			t.Fatalf("Candidates = %v, want %s", ids(got), want)
		}
	}
}

func TestLeastInflightMostFreeSlotsFirst(t *testing.T) {
	a := &sluice.Alias{Name: "fast", Protocols: []sluice.Protocol{chat}, Deployments: []sluice.Deployment{{Weight: 1}}}
	small := &sluice.Account{ID: "small", MaxInflight: 2}
	big := &sluice.Account{ID: "big", MaxInflight: 5}
	es := []*sluice.Edge{{ID: "s", Account: small}, {ID: "b", Account: big}}
	tb := Compile([]*sluice.Alias{a}, map[string]Edges{"fast": {chat: {es}}}, map[string]Strategy{"fast": LeastInflight{}})
	tests := []struct {
		name             string
		giveSmall, giveB int64
		want             string
	}{
		{"MoreFree", 0, 0, "[b s]"},
		{"BigBusier", 0, 4, "[s b]"},
		{"Equal", 1, 4, ""}, // one free slot each: either order
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb.InFlight("small").Store(tt.giveSmall)
			tb.InFlight("big").Store(tt.giveB)
			seen := map[string]bool{}
			for range 200 {
				got, _ := tb.Candidates("fast", chat, nil)
				seen[fmt.Sprint(ids(got))] = true
			}
			switch {
			case tt.want == "" && len(seen) != 2:
				t.Errorf("orders seen = %v, want both (ties at random)", seen)
			case tt.want != "" && (len(seen) != 1 || !seen[tt.want]):
				t.Errorf("orders seen = %v, want only %s", seen, tt.want)
			}
		})
	}
}

func TestCandidatesWithAnotherStrategy(t *testing.T) {
	tb := table(RoundRobin{}, [3]int{0, 1, 3})
	for range 3 {
		got, _ := tb.Candidates("fast", chat, FillFirst{})
		if want := "[d0c0 d0c1 d0c2]"; fmt.Sprint(ids(got)) != want {
			t.Fatalf("Candidates(fill-first) = %v, want %s", ids(got), want)
		}
	}
}

func TestInheritKeepsCounts(t *testing.T) {
	old := table(nil, [3]int{0, 1, 2})
	old.InFlight("d0c0").Add(3)
	next := table(nil, [3]int{0, 1, 1})
	next.Inherit(old)
	if got := next.InFlight("d0c0").Load(); got != 3 {
		t.Errorf("InFlight after Inherit = %d, want 3", got)
	}
	if next.InFlight("d0c1") != nil {
		t.Error("InFlight of an account the new table lacks is not nil")
	}
}

func TestUnknownAlias(t *testing.T) {
	if _, ok := table(nil).Candidates("nope", chat, nil); ok {
		t.Error("Candidates(unknown) ok = true, want false")
	}
	if _, ok := table(nil, [3]int{0, 1, 1}).Candidates("fast", sluice.ProtocolGemini, nil); ok {
		t.Error("Candidates(a protocol the alias does not answer) ok = true, want false")
	}
}

// TestCallersShareTheRotation: callers of two protocols on one alias take
// turns on one deployment's credentials, as callers of one protocol do —
// a rotation per protocol would send both protocols' first requests to
// the same credential.
func TestCallersShareTheRotation(t *testing.T) {
	a := &sluice.Alias{Name: "fast", Protocols: []sluice.Protocol{chat, sluice.ProtocolAnthropic}, Deployments: []sluice.Deployment{{Weight: 1}}}
	var passthrough, translated []*sluice.Edge
	for c := range 2 {
		id := fmt.Sprintf("d0c%d", c)
		acct := &sluice.Account{ID: id}
		passthrough = append(passthrough, &sluice.Edge{ID: id, Account: acct, Protocol: chat})
		translated = append(translated, &sluice.Edge{ID: id, Account: acct, Protocol: sluice.ProtocolAnthropic})
	}
	tb := Compile([]*sluice.Alias{a}, map[string]Edges{"fast": {chat: {passthrough}, sluice.ProtocolAnthropic: {translated}}}, nil)
	var firsts []string
	for _, p := range []sluice.Protocol{chat, sluice.ProtocolAnthropic, chat, sluice.ProtocolAnthropic} {
		got, ok := tb.Candidates("fast", p, nil)
		if !ok || len(got) != 2 || got[0].Protocol != p {
			t.Fatalf("Candidates(%s) = %v, ok %v: want both credentials, on edges for %s", p, ids(got), ok, p)
		}
		firsts = append(firsts, got[0].ID)
	}
	if want := "[d0c0 d0c1 d0c0 d0c1]"; fmt.Sprint(firsts) != want {
		t.Errorf("first candidates = %v, want %s", firsts, want)
	}
}

func BenchmarkCandidates(b *testing.B) {
	for name, s := range strategies {
		b.Run(name, func(b *testing.B) {
			tb := table(s, [3]int{0, 2, 4}, [3]int{0, 1, 4}, [3]int{1, 1, 2})
			b.ReportAllocs()
			for b.Loop() {
				tb.Candidates("fast", chat, nil)
			}
		})
	}
}
