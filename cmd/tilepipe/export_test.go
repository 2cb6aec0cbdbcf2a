package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/export"
	"github.com/tilepipe/tilepipe/stats"
)

// TestExport: tilepipe export writes the replay's every sample and every
// summary as Parquet and CSV; read back with the Parquet reader, the
// median of novel_per_op_ns is each (CPU) summary's median per op and of
// batch_per_op_ns its warm figure (no other kind of sample is in either
// column), the rows are the sample table's, and the
// ratio columns are null where a row has no ratio. It refuses an output
// that exists and a replay whose blob was changed, and leaves nothing.
func TestExport(t *testing.T) {
	long(t)
	dir, code, out, errs := naiveRun(t, tinyCohort(t, gemm16+`, {"op": "add", "dims": {"M": 3, "N": 7}, "seed": 4}`), "2")
	if code != exitOK {
		t.Fatalf("run = exit %d:\n%s%s", code, out, errs)
	}
	into := filepath.Join(t.TempDir(), "export")
	code, out, errs = tp(t, "export", "--checkpoint", dir, "--output", into)
	if code != exitOK {
		t.Fatalf("export = exit %d:\n%s%s", code, out, errs)
	}
	var want strings.Builder
	for _, f := range export.Files {
		want.WriteString(filepath.Join(into, f) + "\n")
	}
	if out != want.String() {
		t.Errorf("export printed %q, want %q", out, want.String())
	}
	doc := readReplay(t, filepath.Join(dir, "replay"))

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	read := func(name string) map[string][]any {
		b, err := os.ReadFile(filepath.Join(into, name))
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(b), parquet.NewReaderProperties(mem), pqarrow.ArrowReadProperties{}, mem)
		if err != nil {
			t.Fatal(err)
		}
		defer tbl.Release()
		cols := map[string][]any{}
		for i, f := range tbl.Schema().Fields() {
			for _, ch := range tbl.Column(i).Data().Chunks() {
				for j := 0; j < ch.Len(); j++ {
					if ch.IsNull(j) {
						cols[f.Name] = append(cols[f.Name], nil)
						continue
					}
					switch a := ch.(type) {
					case *array.Float64:
						cols[f.Name] = append(cols[f.Name], a.Value(j))
					case *array.String:
						cols[f.Name] = append(cols[f.Name], a.Value(j))
					case *array.Int64:
						cols[f.Name] = append(cols[f.Name], a.Value(j))
					case *array.Int32:
						cols[f.Name] = append(cols[f.Name], a.Value(j))
					}
				}
			}
		}
		return cols
	}
	smp := read("samples.parquet")
	perOp, warm := map[artifacts.Pair][]float64{}, map[artifacts.Pair][]float64{}
	kinds := map[string]bool{}
	for i, k := range smp["kind"] {
		kinds[k.(string)] = true
		key := artifacts.Pair{Case: smp["case"][i].(string), Route: smp["route"][i].(string)}
		if v := smp["novel_per_op_ns"][i]; (v != nil) != (k == "novel") {
			t.Fatalf("sample row %d: kind %s, novel_per_op_ns %v: want a value on novel rows alone", i, k, v)
		} else if v != nil {
			perOp[key] = append(perOp[key], v.(float64))
		}
		if v := smp["batch_per_op_ns"][i]; (v != nil) != (k == "batch") {
			t.Fatalf("sample row %d: kind %s, batch_per_op_ns %v: want a value on batch rows alone", i, k, v)
		} else if v != nil {
			warm[key] = append(warm[key], v.(float64))
		}
		if v := smp["single_ns"][i]; (v != nil) != (k == "single") {
			t.Fatalf("sample row %d: kind %s, single_ns %v: want a value on single rows alone", i, k, v)
		}
	}
	if !kinds["batch"] || !kinds["single"] || !kinds["empty"] || !kinds["novel"] || kinds["fresh"] {
		t.Errorf("exported kinds %v: want batch, single, empty and novel samples (a CPU replay takes no fresh ones)", kinds)
	}
	rows := len(smp["kind"])
	st, err := artifacts.OpenStage(filepath.Join(dir, "replay"), artifacts.ReplayType, nil)
	if err != nil {
		t.Fatal(err)
	}
	all, err := samples.ReadFile(st.Store.Path(doc.Samples), mem)
	if err != nil || rows != len(all) {
		t.Errorf("exported %d sample rows, the replay's table has %d (%v)", rows, len(all), err)
	}
	sum := read("summaries.parquet")
	if len(sum["case"]) != len(doc.Summary) {
		t.Fatalf("exported %d summaries, the replay has %d", len(sum["case"]), len(doc.Summary))
	}
	for i, s := range doc.Summary {
		if got := stats.Median(perOp[s.Pair()]); got != s.MedianNs || sum["median_ns"][i] != s.MedianNs || sum["kind"][i] != "novel" {
			t.Errorf("%s/%s: median of novel_per_op_ns %g, summaries.parquet median_ns %v kind %v, the replay's %g novel", s.Case, s.Route, got, sum["median_ns"][i], sum["kind"][i], s.MedianNs)
		}
		if got := stats.Median(warm[s.Pair()]); got != s.WarmNs || sum["warm_ns"][i] != s.WarmNs {
			t.Errorf("%s/%s: median of batch_per_op_ns %g, summaries.parquet warm_ns %v, the replay's %g", s.Case, s.Route, got, sum["warm_ns"][i], s.WarmNs)
		}
		if s.RatioPairs == 0 && sum["ratio"][i] != nil {
			t.Errorf("%s/%s: ratio %v exported for a row without one", s.Case, s.Route, sum["ratio"][i])
		}
	}
	b, err := os.ReadFile(filepath.Join(into, "samples.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := strings.Cut(string(b), "\n"); !strings.HasPrefix(h, "visit,round,position,case,route,kind,index,calls,total_ns,novel_per_op_ns,batch_per_op_ns,single_ns,graph_per_op_ns,") {
		t.Errorf("samples.csv header %q", h)
	}
	if n := strings.Count(string(b), "\n"); n != rows+1 {
		t.Errorf("samples.csv has %d lines, want %d rows and a header", n, rows+1)
	}

	if code, _, errs := tp(t, "export", "--checkpoint", dir, "--output", into); code != exitFailure || !strings.Contains(errs, "export: output "+into+" already exists; choose a new directory") {
		t.Errorf("export over an existing directory = exit %d, %q", code, errs)
	}
	forged := copyRun(t, dir)
	flipByte(t, layerPath(t, filepath.Join(forged, "replay"), artifacts.ReplayType, "samples.arrow"))
	again := filepath.Join(t.TempDir(), "export")
	if code, _, errs := tp(t, "export", "--checkpoint", forged, "--output", again); code != exitFailure || !strings.Contains(errs, "samples.arrow") || !strings.Contains(errs, "digest mismatch") {
		t.Errorf("export of a tampered replay = exit %d, %q; want 1 naming samples.arrow's digest mismatch", code, errs)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(again), "*")); len(m) > 0 {
		t.Errorf("a refused export left %v", m)
	}
}
