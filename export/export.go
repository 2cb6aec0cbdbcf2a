// Package export writes a replay's samples and summaries as Parquet and
// CSV, for pandas, DuckDB, R or a spreadsheet (tilepipe export).
//
// # Samples
//
// One row per sample of the replay's sample table, nothing dropped, with
// its kind. A sample's time is in the column of what it measures, so no
// column mixes measurements: novel_per_op_ns (a novel sample's time per
// call: what a row's median per op is the median of), batch_per_op_ns (a
// warm batch sample's: the row's warm figure), single_ns (one call),
// graph_per_op_ns (a CUDA graph's time per logical call); empty samples
// have only total_ns and calls. Each of those columns is null on the rows of other
// kinds, so the median of the column the summary's kind names is its
// median per op. samples.arrow
// in the replay stage remains the record (per_op_ns on every row, with its
// kind, and every GPU telemetry reading).
//
// # Summaries
//
// One row per (case, route) of the replay document, with the paired
// ratio, its interval and its level; a ratio's columns are null where the
// row has none (the baseline, a failed row).
package export

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
)

// Files are the files Run writes, in order.
var Files = []string{"samples.parquet", "samples.csv", "summaries.parquet", "summaries.csv"}

// Run verifies the replay stage at replayDir (every blob re-hashed) and
// writes Files into output, a directory that must not exist: all of them,
// or none (they are written in a temporary directory beside it, renamed
// into place at the end).
func Run(ctx context.Context, replayDir, output string) error {
	var doc artifacts.ReplayDoc
	st, err := artifacts.ReadStage(replayDir, &doc, nil)
	if err != nil {
		return err
	}
	rows, err := samples.ReadFile(st.Store.Path(doc.Samples), memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("replay %s: samples: %w", replayDir, err)
	}
	if _, err := os.Lstat(output); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("export: output %s already exists; choose a new directory", output)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(output), "."+filepath.Base(output)+".export-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	smp := Samples(rows)
	defer smp.Release()
	sum := Summaries(doc)
	defer sum.Release()
	for _, f := range []struct {
		name string
		rec  arrow.RecordBatch
		enc  func(io.Writer, arrow.RecordBatch) error
	}{{Files[0], smp, writeParquet}, {Files[1], smp, writeCSV}, {Files[2], sum, writeParquet}, {Files[3], sum, writeCSV}} {
		if err := ctx.Err(); err != nil {
			return err
		}
		var b bytes.Buffer
		if err := f.enc(&b, f.rec); err != nil {
			return fmt.Errorf("export %s: %w", f.name, err)
		}
		if err := artifacts.WriteFileAtomic(filepath.Join(tmp, f.name), b.Bytes()); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, output)
}

// SampleSchema is the exported samples' schema.
var SampleSchema = arrow.NewSchema([]arrow.Field{
	{Name: "visit", Type: arrow.PrimitiveTypes.Int32},
	{Name: "round", Type: arrow.PrimitiveTypes.Int32},
	{Name: "position", Type: arrow.PrimitiveTypes.Int32},
	{Name: "case", Type: arrow.BinaryTypes.String},
	{Name: "route", Type: arrow.BinaryTypes.String},
	{Name: "kind", Type: arrow.BinaryTypes.String},
	{Name: "index", Type: arrow.PrimitiveTypes.Int32},
	{Name: "calls", Type: arrow.PrimitiveTypes.Int64},
	{Name: "total_ns", Type: arrow.PrimitiveTypes.Int64},
	{Name: "novel_per_op_ns", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "batch_per_op_ns", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "single_ns", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "graph_per_op_ns", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "timer_ns", Type: arrow.PrimitiveTypes.Int64},
	{Name: "clock", Type: arrow.BinaryTypes.String},
	{Name: "flags", Type: arrow.BinaryTypes.String},
}, nil)

// Samples is the exported samples of rows as one record batch.
func Samples(rows []samples.Row) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, SampleSchema)
	defer b.Release()
	f64 := nullable(b)
	for _, r := range rows {
		b.Field(0).(*array.Int32Builder).Append(r.Visit)
		b.Field(1).(*array.Int32Builder).Append(r.Round)
		b.Field(2).(*array.Int32Builder).Append(r.Position)
		b.Field(3).(*array.StringBuilder).Append(r.Case)
		b.Field(4).(*array.StringBuilder).Append(r.Route)
		b.Field(5).(*array.StringBuilder).Append(r.Kind)
		b.Field(6).(*array.Int32Builder).Append(r.Index)
		b.Field(7).(*array.Int64Builder).Append(r.Calls)
		b.Field(8).(*array.Int64Builder).Append(r.TotalNs)
		f64(9, r.Kind == samples.KindNovel, r.PerOpNs())
		f64(10, r.Kind == samples.KindBatch, r.PerOpNs())
		f64(11, r.Kind == samples.KindSingle, float64(r.Ns()))
		f64(12, r.Kind == samples.KindGraph, r.PerOpNs())
		b.Field(13).(*array.Int64Builder).Append(r.TimerNs)
		b.Field(14).(*array.StringBuilder).Append(r.Clock)
		b.Field(15).(*array.StringBuilder).Append(r.Flags)
	}
	return b.NewRecordBatch()
}

// SummarySchema is the exported summaries' schema.
var SummarySchema = arrow.NewSchema([]arrow.Field{
	{Name: "case", Type: arrow.BinaryTypes.String},
	{Name: "route", Type: arrow.BinaryTypes.String},
	{Name: "status", Type: arrow.BinaryTypes.String},
	{Name: "reason", Type: arrow.BinaryTypes.String},
	{Name: "visits", Type: arrow.PrimitiveTypes.Int64},
	{Name: "samples", Type: arrow.PrimitiveTypes.Int64},
	{Name: "median_ns", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "min_ns", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "max_ns", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "q1_ns", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "q3_ns", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "channel_ns", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "graph_ns", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "baseline", Type: arrow.BinaryTypes.String},
	{Name: "ratio", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "ratio_lo", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "ratio_hi", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "interval_level", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "ratio_rounds", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "verdict", Type: arrow.BinaryTypes.String},
	{Name: "below_best", Type: arrow.BinaryTypes.String},
	{Name: "kind", Type: arrow.BinaryTypes.String},
	{Name: "warm_ns", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "own_graphs", Type: arrow.BinaryTypes.String},
	{Name: "stage_ns", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

// Summaries is the replay document's summaries as one record batch.
func Summaries(doc artifacts.ReplayDoc) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, SummarySchema)
	defer b.Release()
	f64 := nullable(b)
	for _, s := range doc.Summary {
		timed := s.Status == artifacts.StatusPassed && s.Samples > 0
		ratio := s.RatioPairs > 0
		b.Field(0).(*array.StringBuilder).Append(s.Case)
		b.Field(1).(*array.StringBuilder).Append(s.Route)
		b.Field(2).(*array.StringBuilder).Append(s.Status)
		b.Field(3).(*array.StringBuilder).Append(s.Reason)
		b.Field(4).(*array.Int64Builder).Append(int64(s.Visits))
		b.Field(5).(*array.Int64Builder).Append(int64(s.Samples))
		f64(6, timed, s.MedianNs)
		f64(7, timed, s.MinNs)
		f64(8, timed, s.MaxNs)
		f64(9, timed, s.Q1Ns)
		f64(10, timed, s.Q3Ns)
		f64(11, timed && s.ChannelNs > 0, s.ChannelNs)
		f64(12, s.GraphNs > 0, s.GraphNs)
		b.Field(13).(*array.StringBuilder).Append(doc.Config.Baseline)
		f64(14, ratio, s.Ratio)
		f64(15, ratio, s.RatioLo)
		f64(16, ratio, s.RatioHi)
		f64(17, ratio, doc.Config.IntervalLevel())
		if ratio {
			b.Field(18).(*array.Int64Builder).Append(int64(s.RatioPairs))
		} else {
			b.Field(18).(*array.Int64Builder).AppendNull()
		}
		b.Field(19).(*array.StringBuilder).Append(s.Verdict)
		b.Field(20).(*array.StringBuilder).Append(s.BelowBest)
		kind := s.Kind
		if kind == "" {
			kind = samples.KindBatch
		}
		b.Field(21).(*array.StringBuilder).Append(kind)
		f64(22, timed && s.WarmNs > 0, s.WarmNs)
		b.Field(23).(*array.StringBuilder).Append(s.OwnGraphs)
		f64(24, timed && s.StageNs > 0, s.StageNs)
	}
	return b.NewRecordBatch()
}

// nullable appends to b's float column i the value v, or null where ok is
// false.
func nullable(b *array.RecordBuilder) func(i int, ok bool, v float64) {
	return func(i int, ok bool, v float64) {
		if ok {
			b.Field(i).(*array.Float64Builder).Append(v)
		} else {
			b.Field(i).(*array.Float64Builder).AppendNull()
		}
	}
}

func writeCSV(w io.Writer, rec arrow.RecordBatch) error {
	cw := csv.NewWriter(w, rec.Schema(), csv.WithHeader(true), csv.WithNullWriter(""))
	if err := cw.Write(rec); err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}
