// Command rounds reads A/A replay stages and writes, per case, the
// per-round paired ratios replay's summaries use (the median per-call
// time of the route's batch samples in a round over the baseline's in
// the same round; rounds left out for load are left out here too) and
// the median wall time of the case's visits: the recorded noise that
// internal/adaptive's TestFalseVerdictsRecorded resamples. Usage:
//
//	go run ./docs/results/2026-12-01-aa-verdicts/rounds REPLAY_DIR... > internal/adaptive/testdata/aa-rounds.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/stats"
)

// Row is one A/A case's recorded rounds.
type Row struct {
	Case    string    `json:"case"`
	Route   string    `json:"route"`
	VisitNs int64     `json:"visitNs"` // median wall time of one visit of the row
	Ratios  []float64 `json:"ratios"`
	Sources []string  `json:"sources"` // replay manifest digests the ratios come from
}

func main() {
	rows := map[string]*Row{}
	var order []string
	for _, dir := range os.Args[1:] {
		if err := read(dir, rows, &order); err != nil {
			fmt.Fprintln(os.Stderr, "rounds:", err)
			os.Exit(1)
		}
	}
	var out []*Row
	for _, k := range order {
		out = append(out, rows[k])
	}
	b, _ := json.MarshalIndent(map[string]any{"rows": out}, "", " ")
	os.Stdout.Write(append(b, '\n'))
}

func read(dir string, rows map[string]*Row, order *[]string) error {
	st, err := artifacts.OpenStage(dir, artifacts.ReplayType, nil)
	if err != nil {
		return err
	}
	var d artifacts.ReplayDoc
	if err := st.ReadDoc(&d); err != nil {
		return err
	}
	smp, err := samples.ReadFile(st.Store.Path(d.Samples), memory.DefaultAllocator)
	if err != nil {
		return err
	}
	type key struct {
		c, r  string
		round int32
	}
	perRound := map[key][]float64{}
	for _, s := range smp {
		if s.Kind == "batch" {
			k := key{s.Case, s.Route, s.Round}
			perRound[k] = append(perRound[k], s.PerOpNs())
		}
	}
	walls := map[[2]string][]float64{}
	left := map[key]bool{}
	failed := map[string]bool{}
	for _, v := range d.Visits {
		walls[[2]string{v.Case, v.Route}] = append(walls[[2]string{v.Case, v.Route}], float64(v.WallNs))
		if v.Load != nil && v.Load.Loaded && d.Config.Load == artifacts.LoadExclude {
			left[key{v.Case, "", int32(v.Round)}] = true
		}
		if v.Status != artifacts.StatusPassed {
			failed[v.Case] = true
		}
	}
	base := d.Config.Baseline
	for _, s := range d.Summary {
		if s.Route == base || failed[s.Case] || s.Status != artifacts.StatusPassed {
			continue
		}
		id := s.Case + "/" + s.Route
		r := rows[id]
		if r == nil {
			r = &Row{Case: s.Case, Route: s.Route}
			rows[id] = r
			*order = append(*order, id)
		}
		var rounds []int32
		for k := range perRound {
			if k.c == s.Case && k.r == s.Route {
				rounds = append(rounds, k.round)
			}
		}
		slices.Sort(rounds)
		for _, rd := range rounds {
			b, ok := perRound[key{s.Case, base, rd}]
			if !ok || left[key{s.Case, "", rd}] {
				continue
			}
			r.Ratios = append(r.Ratios, stats.Median(perRound[key{s.Case, s.Route, rd}])/stats.Median(b))
		}
		w := append(walls[[2]string{s.Case, s.Route}], walls[[2]string{s.Case, base}]...)
		r.VisitNs = max(r.VisitNs, int64(stats.Median(w)))
		r.Sources = append(r.Sources, st.Descriptor.Digest.String())
	}
	return nil
}
