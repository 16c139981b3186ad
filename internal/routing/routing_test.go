package routing

import (
	"fmt"
	"math"
	"testing"

	"github.com/sluicehq/sluice"
)

// table builds an alias whose deployments have the given priority, weight and
// number of credentials; edge IDs are "d<deployment>c<credential>".
func table(deps ...[3]int) *Table {
	a := &sluice.Alias{Name: "fast"}
	edges := map[string][][]*sluice.Edge{}
	for i, d := range deps {
		a.Deployments = append(a.Deployments, sluice.Deployment{Priority: d[0], Weight: d[1]})
		var es []*sluice.Edge
		for c := range d[2] {
			es = append(es, &sluice.Edge{ID: fmt.Sprintf("d%dc%d", i, c)})
		}
		edges["fast"] = append(edges["fast"], es)
	}
	return Compile([]*sluice.Alias{a}, edges)
}

func ids(es []*sluice.Edge) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func TestTiersInPriorityOrder(t *testing.T) {
	tb := table([3]int{1, 1, 1}, [3]int{0, 1, 1}, [3]int{2, 1, 1})
	got, ok := tb.Candidates("fast")
	if want := "[d1c0 d0c0 d2c0]"; !ok || fmt.Sprint(ids(got)) != want {
		t.Errorf("Candidates = %v, want %s", ids(got), want)
	}
}

func TestRoundRobinOverCredentials(t *testing.T) {
	tb := table([3]int{0, 1, 3})
	var firsts []string
	for range 4 {
		got, _ := tb.Candidates("fast")
		if len(got) != 3 {
			t.Fatalf("Candidates = %v, want every credential", ids(got))
		}
		firsts = append(firsts, got[0].ID)
	}
	if want := "[d0c0 d0c1 d0c2 d0c0]"; fmt.Sprint(firsts) != want {
		t.Errorf("first candidates = %v, want %s", firsts, want)
	}
}

func TestWeightsInsideATier(t *testing.T) {
	tb := table([3]int{0, 3, 1}, [3]int{0, 1, 1})
	const n = 20000
	first := 0
	for range n {
		got, _ := tb.Candidates("fast")
		if len(got) != 2 {
			t.Fatalf("Candidates = %v, want both deployments", ids(got))
		}
		if got[0].ID == "d0c0" {
			first++
		}
	}
	if share := float64(first) / n; math.Abs(share-0.75) > 0.02 {
		t.Errorf("weight-3 deployment first in %.3f of requests, want 0.75±0.02", share)
	}
}

func TestUnknownAlias(t *testing.T) {
	if _, ok := table().Candidates("nope"); ok {
		t.Error("Candidates(unknown) ok = true, want false")
	}
}

func BenchmarkCandidates(b *testing.B) {
	tb := table([3]int{0, 2, 4}, [3]int{0, 1, 4}, [3]int{1, 1, 2})
	b.ReportAllocs()
	for b.Loop() {
		tb.Candidates("fast")
	}
}
