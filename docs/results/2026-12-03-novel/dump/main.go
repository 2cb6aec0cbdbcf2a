// Command dump prints, per visit of a replay stage, the median time per
// call of its novel and warm (batch) samples, the novel samples' calls N
// and median span, and span - N x warm: what a novel sample costs beyond
// N warm calls (the freeze bracket and fetching new inputs).
//
//	go run ./docs/results/2026-12-03-novel/dump REPLAY_DIR
package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dump REPLAY_DIR")
		os.Exit(2)
	}
	st, err := artifacts.OpenStage(os.Args[1], artifacts.ReplayType, nil)
	if err != nil {
		fail(err)
	}
	var doc artifacts.ReplayDoc
	if err := st.ReadDoc(&doc); err != nil {
		fail(err)
	}
	rows, err := samples.ReadFile(st.Store.Path(doc.Samples), nil)
	if err != nil {
		fail(err)
	}
	type visit struct {
		name              string
		calls             int64
		novel, warm, span []float64
	}
	byIndex := map[int32]*visit{}
	var order []int32
	for _, r := range rows {
		v := byIndex[r.Visit]
		if v == nil {
			v = &visit{name: r.Case + " " + r.Route}
			byIndex[r.Visit] = v
			order = append(order, r.Visit)
		}
		switch r.Kind {
		case "novel":
			v.calls = r.Calls
			v.novel, v.span = append(v.novel, r.PerOpNs()), append(v.span, float64(r.TotalNs))
		case "batch":
			v.warm = append(v.warm, r.PerOpNs())
		}
	}
	fmt.Printf("%-45s %6s %12s %12s %12s %14s\n", "visit", "N", "novel ns", "warm ns", "span ns", "span-N*warm")
	for _, i := range order {
		v := byIndex[i]
		fmt.Printf("%-45s %6d %12.0f %12.0f %12.0f %14.0f\n", v.name, v.calls, med(v.novel), med(v.warm), med(v.span), med(v.span)-float64(v.calls)*med(v.warm))
	}
}

func med(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	x = slices.Sorted(slices.Values(x))
	return x[len(x)/2]
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
