// Command fresh reads a replay stage and shows, per (case, route), how the
// fresh-sample bound judged its visits: each fresh sample's excess over its
// control taken alone against the bound, and the median of the visit's
// samples (what replay and the audit use). Usage:
//
//	go run ./docs/results/2026-12-01-fresh-floor/fresh REPLAY_DIR
package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/stats"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "fresh:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	st, err := artifacts.OpenStage(dir, artifacts.ReplayType, nil)
	if err != nil {
		return err
	}
	var d artifacts.ReplayDoc
	if err := st.ReadDoc(&d); err != nil {
		return err
	}
	rows, err := samples.ReadFile(st.Store.Path(d.Samples), memory.DefaultAllocator)
	if err != nil {
		return err
	}
	type key struct {
		visit int32
		index int32
	}
	control := map[key]samples.Row{}
	for _, r := range rows {
		if r.Kind == "control" {
			control[key{r.Visit, r.Index}] = r
		}
	}
	excess := map[int32][]float64{}
	for _, r := range rows {
		if r.Kind == "fresh" {
			c := control[key{r.Visit, r.Index}]
			excess[r.Visit] = append(excess[r.Visit], float64(r.Ns()-c.Ns())/float64(r.Calls))
		}
	}
	type tally struct {
		visits, samples, sampleOver, medianOver, failed int
		ratios                                          []float64
	}
	t := map[[2]string]*tally{}
	var keys [][2]string
	for _, v := range d.Visits {
		k := [2]string{v.Case, v.Route}
		if t[k] == nil {
			t[k] = &tally{}
			keys = append(keys, k)
		}
		a := t[k]
		if v.Status != artifacts.StatusPassed {
			a.failed++
			fmt.Printf("visit %d %s/%s %s: %s\n", v.Index, v.Case, v.Route, v.Status, v.Reason)
		}
		ex := excess[int32(v.Index)]
		if len(ex) == 0 || v.FreshBoundNs == 0 {
			continue
		}
		a.visits++
		for _, e := range ex {
			a.samples++
			if v.WarmNs+e > v.FreshBoundNs {
				a.sampleOver++
			}
		}
		if f := v.WarmNs + stats.Median(ex); f > v.FreshBoundNs {
			a.medianOver++
		}
		a.ratios = append(a.ratios, v.FreshNs/v.FreshBoundNs)
	}
	fmt.Println("| case | route | visits (failed) | fresh sets | fresh samples | samples over the bound alone | visits over it (median of the samples) | fresh/bound median, max |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|")
	for _, k := range keys {
		a := t[k]
		sets := 0
		for _, v := range d.Visits {
			if v.Case == k[0] && v.Route == k[1] {
				sets = v.FreshSets
			}
		}
		slices.Sort(a.ratios)
		med, mx := 0.0, 0.0
		if len(a.ratios) > 0 {
			med, mx = stats.Median(a.ratios), a.ratios[len(a.ratios)-1]
		}
		fmt.Printf("| %s | %s | %d (%d) | %d | %d | %d | %d | %.2f, %.2f |\n", k[0], k[1], a.visits+a.failed, a.failed, sets, a.samples, a.sampleOver, a.medianOver, med, mx)
	}
	return nil
}
