// Command gaps prints, per visit of a replay stage, its empty samples'
// median and slowest span, its batch samples' smallest and median gap
// between replay's span and the timer's number (the CUDA events on a
// GPU), its novel samples' smallest gap, and its batch samples' median
// span, in ns, with visit.CheckGap's bound on the median batch gap
// (allowed): what that bound must allow for.
//
//	go run ./docs/results/2026-12-04-gpu-clock-probe/gaps REPLAY_DIR
package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/visit"
	"github.com/tilepipe/tilepipe/stats"
)

func main() {
	st, err := artifacts.OpenStage(os.Args[1], artifacts.ReplayType, nil)
	if err != nil {
		panic(err)
	}
	var doc artifacts.ReplayDoc
	if err := st.ReadDoc(&doc); err != nil {
		panic(err)
	}
	rows, err := samples.ReadFile(st.Store.Path(doc.Samples), nil)
	if err != nil {
		panic(err)
	}
	type v struct {
		name                     string
		empty, bgap, ngap, bspan []float64
	}
	m := map[int32]*v{}
	var order []int32
	for _, r := range rows {
		x := m[r.Visit]
		if x == nil {
			x = &v{name: r.Case + " " + r.Route}
			m[r.Visit] = x
			order = append(order, r.Visit)
		}
		switch r.Kind {
		case "empty":
			x.empty = append(x.empty, float64(r.TotalNs))
		case "batch":
			x.bgap = append(x.bgap, float64(r.TotalNs-r.TimerNs))
			x.bspan = append(x.bspan, float64(r.TotalNs))
		case "novel":
			x.ngap = append(x.ngap, float64(r.TotalNs-r.TimerNs))
		}
	}
	fmt.Printf("%-50s %10s %10s %10s %10s %10s %10s %10s\n", "visit", "emptyMed", "emptyMax", "bgapMin", "bgapMed", "allowed", "ngapMin", "bspanMed")
	for _, i := range order {
		x := m[i]
		allowed := min(visit.GapFactor*mx(x.empty)+float64(visit.GapBase), float64(visit.GapMax))
		fmt.Printf("%-50s %10.0f %10.0f %10.0f %10.0f %10.0f %10.0f %10.0f\n", x.name, med(x.empty), mx(x.empty), mn(x.bgap), med(x.bgap), allowed, mn(x.ngap), med(x.bspan))
	}
}

// med, mx and mn are 0 for a visit with no samples of the kind.
func med(a []float64) float64 {
	if len(a) == 0 {
		return 0
	}
	return stats.Median(a)
}

func mx(a []float64) float64 {
	if len(a) == 0 {
		return 0
	}
	return slices.Max(a)
}

func mn(a []float64) float64 {
	if len(a) == 0 {
		return 0
	}
	return slices.Min(a)
}
