package export

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
)

// TestParquetRoundTrip writes hand-made samples with writeParquet and reads
// them back with arrow-go's pqarrow, an independent reader: the schema
// (names, types, nullability) and every value, nulls included, come back
// as written, though the file carries no Arrow schema of its own.
func TestParquetRoundTrip(t *testing.T) {
	rows := []samples.Row{
		{Visit: 0, Round: 1, Position: 2, Case: "gemm-16", Route: "halide", Kind: "novel", Index: 3, Calls: 4, TotalNs: 4000, TimerNs: 3900, Clock: "replay"},
		{Visit: 1, Round: 0, Position: 0, Case: "add-3x7", Route: "openblas ä", Kind: "batch", Index: 0, Calls: 10, TotalNs: 500, TimerNs: 450, Clock: "replay", Flags: "throttle"},
		{Visit: 2, Case: "add-3x7", Route: "torch", Kind: "empty", Calls: 0, TotalNs: 7},
	}
	var doc artifacts.ReplayDoc
	doc.Config.Baseline = "torch-eager"
	doc.Summary = []artifacts.Summary{
		{Case: "gemm-16", Route: "halide", Status: artifacts.StatusPassed, Visits: 2, Samples: 20, MedianNs: 1200, MinNs: 1100, MaxNs: 1500, Q1Ns: 1150, Q3Ns: 1300,
			Ratio: 0.8, RatioLo: 0.7, RatioHi: 0.9, RatioPairs: 6, Verdict: "faster", Kind: samples.KindNovel, WarmNs: 1000},
		{Case: "gemm-16", Route: "torch-eager", Status: artifacts.StatusPassed, Visits: 2, Samples: 20, MedianNs: 1500, MinNs: 1400, MaxNs: 1800, Kind: samples.KindNovel},
		{Case: "add-3x7", Route: "openblas", Status: "unsupported", Reason: "op add: gemm only"},
	}
	// 2000 rows: runs of definition levels longer than a byte's varint.
	many := make([]samples.Row, 2000)
	for i := range many {
		many[i] = samples.Row{Visit: int32(i), Case: "c", Route: "r", Kind: []string{"novel", "novel", "empty"}[i%3], Calls: int64(i % 7), TotalNs: int64(i)}
	}
	for _, tc := range []struct {
		name string
		rec  arrow.RecordBatch
	}{{"samples", Samples(rows)}, {"empty samples", Samples(nil)}, {"2000 samples", Samples(many)}, {"summaries (23 columns)", Summaries(doc)}} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.rec.Release()
			var b bytes.Buffer
			if err := writeParquet(&b, tc.rec); err != nil {
				t.Fatal(err)
			}
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(b.Bytes()), parquet.NewReaderProperties(mem), pqarrow.ArrowReadProperties{}, mem)
			if err != nil {
				t.Fatal(err)
			}
			defer tbl.Release()
			if !sameFields(tbl.Schema(), tc.rec.Schema()) {
				t.Fatalf("schema read back:\n%s\nwant:\n%s", tbl.Schema(), tc.rec.Schema())
			}
			if tbl.NumRows() != tc.rec.NumRows() {
				t.Fatalf("%d rows read back, want %d", tbl.NumRows(), tc.rec.NumRows())
			}
			for i := range tc.rec.NumCols() {
				want := values(tc.rec.Column(int(i)))
				var got []any
				for _, ch := range tbl.Column(int(i)).Data().Chunks() {
					got = append(got, values(ch)...)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("column %s read back %v, want %v", tc.rec.ColumnName(int(i)), got, want)
				}
			}
		})
	}
}

// TestParquetRefusesUnmapped: a column type the writer has no mapping for
// is refused with the column's name, not written as something else.
func TestParquetRefusesUnmapped(t *testing.T) {
	sch := arrow.NewSchema([]arrow.Field{{Name: "ok", Type: arrow.PrimitiveTypes.Int64}, {Name: "flag", Type: arrow.FixedWidthTypes.Boolean}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).Append(1)
	b.Field(1).(*array.BooleanBuilder).Append(true)
	rec := b.NewRecordBatch()
	defer rec.Release()
	err := writeParquet(&bytes.Buffer{}, rec)
	if want := "column flag: type bool has no Parquet mapping here"; err == nil || err.Error() != want {
		t.Fatalf("writeParquet = %v, want %q", err, want)
	}
}

// TestParquetRefusesNullInRequired: a null in a column the schema calls
// required is refused, naming the column, not written as a shifted page.
func TestParquetRefusesNullInRequired(t *testing.T) {
	sch := arrow.NewSchema([]arrow.Field{{Name: "calls", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).Append(1)
	b.Field(0).(*array.Int64Builder).AppendNull()
	rec := b.NewRecordBatch()
	defer rec.Release()
	err := writeParquet(&bytes.Buffer{}, rec)
	if want := "column calls: 1 nulls in a required column"; err == nil || err.Error() != want {
		t.Fatalf("writeParquet = %v, want %q", err, want)
	}
}

// sameFields: a and b have the same field names, types and nullability
// (the reader adds each field's Parquet id as metadata).
func sameFields(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i, f := range a.Fields() {
		g := b.Field(i)
		if f.Name != g.Name || !arrow.TypeEqual(f.Type, g.Type) || f.Nullable != g.Nullable {
			return false
		}
	}
	return true
}

// values is col's values as Go values, nil for a null.
func values(col arrow.Array) []any {
	var out []any
	for j := range col.Len() {
		if col.IsNull(j) {
			out = append(out, nil)
			continue
		}
		switch a := col.(type) {
		case *array.Float64:
			out = append(out, a.Value(j))
		case *array.String:
			out = append(out, a.Value(j))
		case *array.Int64:
			out = append(out, a.Value(j))
		case *array.Int32:
			out = append(out, a.Value(j))
		default:
			out = append(out, a.ValueStr(j))
		}
	}
	return out
}
