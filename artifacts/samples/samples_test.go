package samples

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func testRows() []Row {
	return []Row{
		{Visit: 0, Round: 0, Position: 0, Case: "gemm-64x64x64", Route: "naive", Kind: "batch", Index: 0, Calls: 100, TotalNs: 123456, Clock: ClockReplay},
		{Visit: 0, Round: 0, Position: 0, Case: "gemm-64x64x64", Route: "naive", Kind: "batch", Index: 1, Calls: 3, TotalNs: 10, Clock: ClockReplay},
		{Visit: 1, Round: 2, Position: 1, Case: "add-64x1000", Route: "openblas", Kind: "single", Index: 0, Calls: 1, TotalNs: 0, Clock: ClockReplay},
		{Visit: math.MaxInt32, Round: 7, Position: 3, Case: "", Route: "r", Kind: "batch", Index: 9, Calls: math.MaxInt64, TotalNs: math.MaxInt64, TimerNs: math.MaxInt64, Clock: ClockReplay},
		{Visit: 2, Round: 0, Position: 0, Case: "c", Route: "r", Kind: "empty", Index: 0, Calls: 0, TotalNs: 25000, TimerNs: 40, Clock: ClockReplay},
		{Visit: 3, Round: 0, Position: 1, Case: "add-1024-cuda", Route: "triton", Kind: "batch", Index: 0, Calls: 64, TotalNs: 400000, TimerNs: 320000, Clock: ClockCUDA},
		{Visit: 4, Round: 0, Position: 2, Case: "add-1024-cuda", Route: "cublas", Kind: "batch", Index: 0, Calls: 64, TotalNs: 400000, TimerNs: 320000, Clock: ClockCUDA,
			Telemetry: TelemetryNVML, Before: h200Idle, After: h200Capped, Flags: "power,other_process"},
	}
}

// Readings as an H200 gives them: idle, and at its power cap with a
// second process on the device.
var (
	h200Idle   = Reading{SMMHz: 1980, MemMHz: 3201, TempC: 31, PowerMW: 118000, Reasons: 0, Procs: 1, PowerViolationNs: 5000, ThermalViolationNs: -1}
	h200Capped = Reading{SMMHz: 1755, MemMHz: 3201, TempC: 52, PowerMW: 699000, Reasons: ReasonSwPowerCap, Procs: 2, PowerViolationNs: 9000, ThermalViolationNs: -1}
)

// TestFlags: each reading that a flag names raises it, alone; unsupported
// (-1) readings raise nothing, and a CPU sample has none.
func TestFlags(t *testing.T) {
	idle := h200Idle
	for _, tc := range []struct {
		name          string
		before, after func(r *Reading)
		want          string
	}{
		{"quiet", nil, nil, ""},
		{"power cap after", nil, func(r *Reading) { r.Reasons = ReasonSwPowerCap }, "power"},
		{"power brake before", func(r *Reading) { r.Reasons = ReasonHwPowerBrake }, nil, "power"},
		{"power violation accrued", nil, func(r *Reading) { r.PowerViolationNs++ }, "power"},
		{"power violation unsupported", func(r *Reading) { r.PowerViolationNs = -1 }, func(r *Reading) { r.PowerViolationNs = 7 }, ""},
		{"thermal slowdown", nil, func(r *Reading) { r.Reasons = ReasonSwThermal }, "thermal"},
		{"hw thermal", func(r *Reading) { r.Reasons = ReasonHwThermal }, nil, "thermal"},
		{"thermal violation accrued", func(r *Reading) { r.ThermalViolationNs = 0 }, func(r *Reading) { r.ThermalViolationNs = 1 }, "thermal"},
		{"hw slowdown", nil, func(r *Reading) { r.Reasons = ReasonHwSlowdown }, "hw_slowdown"},
		{"idle and app clocks reasons raise nothing", func(r *Reading) { r.Reasons = 0x1 | 0x2 }, nil, ""},
		{"reasons unsupported", func(r *Reading) { r.Reasons = -1 }, nil, ""},
		{"another process", func(r *Reading) { r.Procs = 2 }, nil, "other_process"},
		{"processes unseen", func(r *Reading) { r.Procs = 0 }, func(r *Reading) { r.Procs = -1 }, ""},
		{"all", func(r *Reading) { r.Reasons = ReasonHwSlowdown | ReasonSwThermal }, func(r *Reading) { r.Reasons, r.Procs, r.PowerViolationNs = ReasonSwPowerCap, 3, 6000 }, "power,thermal,hw_slowdown,other_process"},
	} {
		b, a := idle, idle
		if tc.before != nil {
			tc.before(&b)
		}
		if tc.after != nil {
			tc.after(&a)
		}
		if got := Flags(TelemetryNVML, b, a); got != tc.want {
			t.Errorf("%s: Flags = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := Flags("", h200Capped, h200Capped); got != "" {
		t.Errorf("Flags without telemetry = %q, want none", got)
	}
}

func writeFile(t testing.TB, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "samples.arrow")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func encode(t testing.TB, rows []Row) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, rows); err != nil {
		t.Fatalf("Write = %v", err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		rows []Row
	}{
		{"both kinds", testRows()},
		{"empty", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			got, err := ReadFile(writeFile(t, encode(t, tt.rows)), mem)
			if err != nil {
				t.Fatalf("ReadFile(Write(rows)) = %v", err)
			}
			if !reflect.DeepEqual(got, tt.rows) {
				t.Errorf("ReadFile(Write(rows)) = %+v, want %+v", got, tt.rows)
			}
		})
	}
}

func TestPerOpNs(t *testing.T) {
	if got := (Row{Calls: 4, TotalNs: 10, Clock: ClockReplay}).PerOpNs(); got != 2.5 {
		t.Errorf("PerOpNs(10 ns, 4 calls) = %g, want 2.5", got)
	}
	if got := (Row{Calls: 4, TotalNs: 10, TimerNs: 6, Clock: ClockCUDA}).PerOpNs(); got != 1.5 {
		t.Errorf("PerOpNs(CUDA events 6 ns, 4 calls) = %g, want 1.5", got)
	}
}

// table is a hand-built sample table, one record batch per entry of
// batches; per_op_ns is taken from perOp where set, else computed.
type table struct {
	schema  *arrow.Schema
	batches [][]Row
	perOp   map[int]float64 // by row index within the batch
	nullCol int             // column index to set null in row 0, or -1
}

func (tb table) build(t testing.TB) []byte {
	t.Helper()
	mem := memory.NewGoAllocator()
	var buf bytes.Buffer
	fw, err := ipc.NewFileWriter(&buf, ipc.WithSchema(tb.schema), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	for _, rows := range tb.batches {
		b := array.NewRecordBuilder(mem, tb.schema)
		for i, r := range rows {
			vals := []any{r.Visit, r.Round, r.Position, r.Case, r.Route, r.Kind, r.Index, r.Calls, r.TotalNs, r.PerOpNs(), r.TimerNs, r.Clock, r.Telemetry}
			for _, rd := range []Reading{r.Before, r.After} {
				for _, v := range rd.values() {
					vals = append(vals, v)
				}
			}
			vals = append(vals, r.Flags)
			if v, ok := tb.perOp[i]; ok {
				vals[9] = v
			}
			for c := range tb.schema.NumFields() {
				fb := b.Field(c)
				if i == 0 && c == tb.nullCol {
					fb.AppendNull()
					continue
				}
				switch fb := fb.(type) {
				case *array.Int32Builder:
					fb.Append(vals[c].(int32))
				case *array.Int64Builder:
					fb.Append(vals[c].(int64))
				case *array.StringBuilder:
					fb.Append(vals[c].(string))
				case *array.Float64Builder:
					fb.Append(vals[c].(float64))
				default:
					t.Fatalf("table: column %d builder %T", c, fb)
				}
			}
		}
		rec := b.NewRecordBatch()
		b.Release()
		if err := fw.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func goodTable(batches ...[]Row) table {
	return table{schema: Schema, batches: batches, nullCol: -1}
}

func TestReadViolations(t *testing.T) {
	rows := testRows()
	batch := rows[:1]
	bad := func(mod func(r *Row)) []Row {
		r := rows[0]
		mod(&r)
		return []Row{rows[1], r}
	}
	otherSchema := arrow.NewSchema(append(append([]arrow.Field{}, Schema.Fields()[:9]...), arrow.Field{Name: "per_op_ns", Type: arrow.PrimitiveTypes.Float32}), nil)
	tests := []struct {
		name  string
		table table
		raw   []byte
		want  string // after "samples <path>: "
	}{
		{name: "hand-built good table", table: goodTable(rows[:2], rows[2:]), want: ""},
		{name: "per_op_ns inconsistent", table: func() table {
			tb := goodTable(rows[:2])
			tb.perOp = map[int]float64{1: 4}
			return tb
		}(), want: "row 1: per_op_ns 4 disagrees with its clock's span (replay) over calls: 3.3333333333333335"},
		{name: "per_op_ns NaN", table: func() table {
			tb := goodTable(rows[:1])
			tb.perOp = map[int]float64{0: math.NaN()}
			return tb
		}(), want: "row 0: per_op_ns NaN disagrees with its clock's span (replay) over calls: 1234.56"},
		{name: "row index counts across batches", table: func() table {
			tb := goodTable(rows[:2], rows[:2])
			tb.perOp = map[int]float64{1: 4}
			return tb
		}(), want: "row 1: per_op_ns 4 disagrees with its clock's span (replay) over calls: 3.3333333333333335"},
		{name: "batch with calls 0", table: goodTable(bad(func(r *Row) { r.Calls = 0; r.TotalNs = 5 })), want: `row 1: kind "batch" with 0 calls: want batch (calls >= 1), single (1), empty (0), novel (calls >= 1), or graph (calls >= 1, clock cuda_events)`},
		{name: "calls negative", table: goodTable(bad(func(r *Row) { r.Calls = -1 })), want: `row 1: kind "batch" with -1 calls: want batch (calls >= 1), single (1), empty (0), novel (calls >= 1), or graph (calls >= 1, clock cuda_events)`},
		{name: "graph on replay's clock", table: goodTable(bad(func(r *Row) { r.Kind = "graph" })), want: `row 1: kind "graph" with 100 calls: want batch (calls >= 1), single (1), empty (0), novel (calls >= 1), or graph (calls >= 1, clock cuda_events)`},
		{name: "empty with calls", table: goodTable(bad(func(r *Row) { r.Kind = "empty" })), want: `row 1: kind "empty" with 100 calls: want batch (calls >= 1), single (1), empty (0), novel (calls >= 1), or graph (calls >= 1, clock cuda_events)`},
		{name: "single with 2 calls", table: goodTable(bad(func(r *Row) { r.Kind, r.Calls = "single", 2 })), want: `row 1: kind "single" with 2 calls: want batch (calls >= 1), single (1), empty (0), novel (calls >= 1), or graph (calls >= 1, clock cuda_events)`},
		{name: "total_ns negative", table: goodTable(bad(func(r *Row) { r.TotalNs = -7 })), want: "row 1: total_ns=-7 timer_ns=0: want both >= 0"},
		{name: "timer_ns negative", table: goodTable(bad(func(r *Row) { r.TimerNs = -7 })), want: "row 1: total_ns=123456 timer_ns=-7: want both >= 0"},
		{name: "fresh (visit protocol 3)", table: goodTable(bad(func(r *Row) { r.Kind = "fresh" })), want: `row 1: kind "fresh" with 100 calls: want batch (calls >= 1), single (1), empty (0), novel (calls >= 1), or graph (calls >= 1, clock cuda_events)`},
		{name: "unknown kind", table: goodTable(bad(func(r *Row) { r.Kind = "warmup" })), want: `row 1: kind "warmup" with 100 calls: want batch (calls >= 1), single (1), empty (0), novel (calls >= 1), or graph (calls >= 1, clock cuda_events)`},
		{name: "empty kind", table: goodTable(bad(func(r *Row) { r.Kind = "" })), want: `row 1: kind "" with 100 calls: want batch (calls >= 1), single (1), empty (0), novel (calls >= 1), or graph (calls >= 1, clock cuda_events)`},
		{name: "unknown clock", table: goodTable(bad(func(r *Row) { r.Clock = "tsc" })), want: `row 1: clock "tsc" with kind "batch": want "replay", or "cuda_events" for a sample with calls`},
		{name: "no clock", table: goodTable(bad(func(r *Row) { r.Clock = "" })), want: `row 1: clock "" with kind "batch": want "replay", or "cuda_events" for a sample with calls`},
		{name: "empty sample on CUDA events", table: goodTable(bad(func(r *Row) { r.Kind, r.Calls, r.Clock = "empty", 0, ClockCUDA })), want: `row 1: clock "cuda_events" with kind "empty": want "replay", or "cuda_events" for a sample with calls`},
		{name: "per_op_ns of the wrong span", table: func() table {
			tb := goodTable(rows[5:6])
			tb.perOp = map[int]float64{0: 6250}
			return tb
		}(), want: "row 0: per_op_ns 6250 disagrees with its clock's span (cuda_events) over calls: 5000"},
		{name: "flags cleared", table: goodTable(append(rows[:1:1], func() Row { r := rows[6]; r.Flags = ""; return r }())), want: `row 1: flags "" disagree with the readings, which give "power,other_process"`},
		{name: "flag forged", table: goodTable(append(rows[:1:1], func() Row { r := rows[6]; r.Flags = "thermal"; return r }())), want: `row 1: flags "thermal" disagree with the readings, which give "power,other_process"`},
		{name: "readings without a source", table: goodTable(append(rows[:1:1], func() Row { r := rows[6]; r.Telemetry = ""; return r }())), want: `row 1: telemetry: readings without a source: want all zero`},
		{name: "unknown source", table: goodTable(append(rows[:1:1], func() Row { r := rows[6]; r.Telemetry = "nvidia-smi"; return r }())), want: `row 1: telemetry "nvidia-smi": want "" (none) or "nvml"`},
		{name: "reading below -1", table: goodTable(append(rows[:1:1], func() Row { r := rows[6]; r.After.TempC = -40; return r }())), want: `row 1: telemetry: temp_c_after = -40: want -1 (unsupported) or more`},
		{name: "null calls", table: func() table {
			tb := goodTable(batch)
			tb.nullCol = 7
			return tb
		}(), want: "column calls has nulls"},
		{name: "null case", table: func() table {
			tb := goodTable(batch)
			tb.nullCol = 3
			return tb
		}(), want: "column case has nulls"},
		{name: "wrong schema", table: table{schema: otherSchema, batches: [][]Row{}, nullCol: -1}, want: "schema: want " + Schema.String() + ", got " + otherSchema.String()},
		{name: "missing column", table: table{schema: arrow.NewSchema(Schema.Fields()[:9], nil), nullCol: -1}, want: "schema: want " + Schema.String() + ", got " + arrow.NewSchema(Schema.Fields()[:9], nil).String()},
		{name: "not arrow", raw: []byte("visit,round\n1,2\n"), want: "arrow ipc: arrow/ipc: could not decode footer: arrow/ipc: file too small (size=16)"},
		{name: "not arrow, longer", raw: bytes.Repeat([]byte("visit,round\n"), 10), want: "arrow ipc: arrow/ipc: could not decode footer: arrow/ipc: not an Arrow file"},
		{name: "truncated", raw: func() []byte { b := encode(t, rows); return b[:len(b)/2] }(), want: "arrow ipc: arrow/ipc: could not decode footer: arrow/ipc: not an Arrow file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			b := tt.raw
			if b == nil {
				b = tt.table.build(t)
			}
			path := writeFile(t, b)
			got, err := ReadFile(path, mem)
			want := "<nil>"
			if tt.want != "" {
				want = "samples " + path + ": " + tt.want
			}
			if errString(err) != want {
				t.Errorf("ReadFile(%s) = %v, want %s", tt.name, err, want)
			}
			if err != nil && got != nil {
				t.Errorf("ReadFile(%s) = %d rows with an error, want none", tt.name, len(got))
			}
		})
	}
}

func TestReadFileMissing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "none.arrow")
	_, err := ReadFile(p, nil)
	if want := "open " + p + ": no such file or directory"; errString(err) != want {
		t.Errorf("ReadFile(%s) = %v, want %s", p, err, want)
	}
}

func FuzzReadFile(f *testing.F) {
	f.Add(encode(f, testRows()))
	f.Add(encode(f, nil))
	tb := goodTable(testRows()[:2], testRows()[2:])
	f.Add(tb.build(f))
	tb.perOp = map[int]float64{0: 1}
	f.Add(tb.build(f))
	f.Add([]byte("ARROW1\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := writeFile(t, b)
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		rows, err := ReadFile(path, mem)
		if err != nil {
			// Arrow does not release what it held when it fails inside a
			// record batch (it recovers its own panics, and read recovers
			// the rest); the Go allocator's GC reclaims it. Error paths of
			// ReadFile's own checks are leak-checked in TestReadViolations.
			return
		}
		mem.AssertSize(t, 0)
		for i, r := range rows {
			if r.TotalNs < 0 || r.TimerNs < 0 || !(r.Kind == "batch" && r.Calls >= 1 || r.Kind == "single" && r.Calls == 1 || r.Kind == "empty" && r.Calls == 0) {
				t.Fatalf("ReadFile accepted row %d = %+v", i, r)
			}
		}
		// What ReadFile accepts, Write reproduces.
		again, err := ReadFile(writeFile(t, encode(t, rows)), nil)
		if err != nil || !reflect.DeepEqual(again, rows) {
			t.Fatalf("ReadFile(Write(ReadFile(b))) = %d rows, %v, want the same %d rows", len(again), err, len(rows))
		}
	})
}
