// Package samples reads and writes the timing sample table: an Arrow IPC
// file with one row per sample, nothing dropped.
package samples

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/tilepipe/tilepipe/artifacts/internal/footer"
)

// Row is one timing sample of one visit.
type Row struct {
	Visit    int32
	Round    int32
	Position int32
	Case     string
	Route    string
	// Kind: "batch" (Calls calls on the warm sets), "single" (one call),
	// "novel" (call j on novel set j, j < Calls, written while the visit
	// was frozen: the visit's claim, visit protocol 4), "empty" (no call:
	// the overhead of replay's channel to the timer) or "graph" (R replays
	// of a CUDA graph of N calls, Calls = N*R; GPU only).
	Kind    string
	Index   int32
	Calls   int64
	TotalNs int64 // replay's span
	TimerNs int64 // the timer's own number
	// Clock says which span is the sample's time: [ClockReplay] (TotalNs;
	// TimerNs a cross-check) or [ClockCUDA] (TimerNs, the CUDA-event span
	// of the launches, checked to lie inside TotalNs).
	Clock string
	// Telemetry is the GPU's state read just before the sample's command
	// and just after its report (docs/gpu.md, "Telemetry"): "" on a CPU
	// sample (the readings are zero), else the source, [TelemetryNVML].
	Telemetry     string
	Before, After Reading
	// Flags are what the readings show about the sample, [Flags]: derived,
	// stored so a table reader sees them, and checked on every read.
	Flags string
}

// TelemetryNVML: the readings came from NVML, in a process of replay's
// outside the visit.
const TelemetryNVML = "nvml"

// Reading is one NVML reading of the GPU; -1 where the device does not
// support the value.
type Reading struct {
	SMMHz, MemMHz, TempC, PowerMW int64
	// Reasons is the clock-event (throttle) reason mask.
	Reasons int64
	// Procs is the number of processes with a compute context on the GPU,
	// the visit's own included.
	Procs int64
	// NVML's running totals of time the clocks were held down for power
	// and for heat.
	PowerViolationNs, ThermalViolationNs int64
}

// Clock-event reasons (nvml.h, nvmlClocksEventReason*) a flag names.
const (
	ReasonSwPowerCap       = 0x4
	ReasonHwSlowdown       = 0x8
	ReasonSwThermal        = 0x20
	ReasonHwThermal        = 0x40
	ReasonHwPowerBrake     = 0x80
	reasonsPower           = ReasonSwPowerCap | ReasonHwPowerBrake
	reasonsThermal         = ReasonSwThermal | ReasonHwThermal
	FlagPower              = "power"
	FlagThermal            = "thermal"
	FlagHwSlowdown         = "hw_slowdown"
	FlagOtherProcess       = "other_process"
	telemetryColumns       = 12 // where the telemetry columns start
	readingColumnsPerPhase = 8
)

// Flags is what a sample's readings show, comma-separated: "power" (a
// power cap or power brake reason before or after, or power violation
// time accrued in between), "thermal" (the same for heat), "hw_slowdown"
// (the hardware slowdown reason, which NVML does not attribute) and
// "other_process" (more compute processes on the GPU than the visit's
// own one). "" when none, and for a sample with no telemetry.
func Flags(telemetry string, before, after Reading) string {
	if telemetry == "" {
		return ""
	}
	var f []string
	reasons := max(before.Reasons, 0) | max(after.Reasons, 0)
	grew := func(b, a int64) bool { return b >= 0 && a >= 0 && a > b }
	if reasons&reasonsPower != 0 || grew(before.PowerViolationNs, after.PowerViolationNs) {
		f = append(f, FlagPower)
	}
	if reasons&reasonsThermal != 0 || grew(before.ThermalViolationNs, after.ThermalViolationNs) {
		f = append(f, FlagThermal)
	}
	if reasons&ReasonHwSlowdown != 0 {
		f = append(f, FlagHwSlowdown)
	}
	if before.Procs > 1 || after.Procs > 1 {
		f = append(f, FlagOtherProcess)
	}
	return strings.Join(f, ",")
}

// Implausible says why a reading cannot describe a powered GPU ("" when it
// can): a device runs with non-zero clocks and draws power, so zeros mean
// the reader read nothing (an H200 run's monitor once printed zeros for
// every value: docs/results/2026-12-01-telemetry).
func (r Reading) Implausible() string {
	switch {
	case r.SMMHz == 0 || r.MemMHz == 0:
		return fmt.Sprintf("SM clock %d MHz, memory clock %d MHz: a powered GPU has both", r.SMMHz, r.MemMHz)
	case r.PowerMW == 0:
		return "0 mW: a powered GPU draws power"
	}
	return ""
}

func (r Reading) values() [readingColumnsPerPhase]int64 {
	return [...]int64{r.SMMHz, r.MemMHz, r.TempC, r.PowerMW, r.Reasons, r.Procs, r.PowerViolationNs, r.ThermalViolationNs}
}

func readingOf(v [readingColumnsPerPhase]int64) Reading {
	return Reading{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]}
}

var readingNames = [readingColumnsPerPhase]string{"sm_mhz", "mem_mhz", "temp_c", "power_mw", "clock_reasons", "gpu_procs", "power_violation_ns", "thermal_violation_ns"}

// Sample kinds (Row.Kind), the one list every stage names them by.
const (
	// KindBatch: Calls calls on the warm sets, again and again.
	KindBatch = "batch"
	// KindSingle: one call.
	KindSingle = "single"
	// KindNovel: N calls, call j on novel slot j, whose inputs replay
	// wrote while the visit was frozen (visit protocol 4,
	// docs/protocol.md): the claim's samples.
	KindNovel = "novel"
	// KindEmpty: no call, the channel's own overhead.
	KindEmpty = "empty"
	// KindGraph: R replays of a CUDA graph of N logical calls
	// (docs/gpu.md, "Graph samples"); its calls are N*R.
	KindGraph = "graph"
)

// Clocks: which span a row's time is.
const (
	// ClockReplay: replay's own span of the sample (every CPU sample, and
	// every empty sample).
	ClockReplay = "replay"
	// ClockCUDA: the CUDA-event span the timer recorded around the
	// sample's launches on the GPU; replay's span, beside it, includes the
	// launch of the first and the synchronisation after the last.
	ClockCUDA = "cuda_events"
)

// Ns is the sample's time: the span its clock names.
func (r Row) Ns() int64 {
	if r.Clock == ClockCUDA {
		return r.TimerNs
	}
	return r.TotalNs
}

// PerOpNs is the sample's time per call (for an empty sample, its span).
func (r Row) PerOpNs() float64 { return float64(r.Ns()) / float64(max(r.Calls, 1)) }

// Schema is the table's schema: the sample, then its telemetry (a
// column per reading before and after, "_before"/"_after"), then flags.
var Schema = arrow.NewSchema(fields(), nil)

func fields() []arrow.Field {
	f := []arrow.Field{
		{Name: "visit", Type: arrow.PrimitiveTypes.Int32},
		{Name: "round", Type: arrow.PrimitiveTypes.Int32},
		{Name: "position", Type: arrow.PrimitiveTypes.Int32},
		{Name: "case", Type: arrow.BinaryTypes.String},
		{Name: "route", Type: arrow.BinaryTypes.String},
		{Name: "kind", Type: arrow.BinaryTypes.String},
		{Name: "index", Type: arrow.PrimitiveTypes.Int32},
		{Name: "calls", Type: arrow.PrimitiveTypes.Int64},
		{Name: "total_ns", Type: arrow.PrimitiveTypes.Int64},
		{Name: "per_op_ns", Type: arrow.PrimitiveTypes.Float64},
		{Name: "timer_ns", Type: arrow.PrimitiveTypes.Int64},
		{Name: "clock", Type: arrow.BinaryTypes.String},
		{Name: "telemetry", Type: arrow.BinaryTypes.String},
	}
	for _, phase := range []string{"_before", "_after"} {
		for _, n := range readingNames {
			f = append(f, arrow.Field{Name: n + phase, Type: arrow.PrimitiveTypes.Int64})
		}
	}
	return append(f, arrow.Field{Name: "flags", Type: arrow.BinaryTypes.String})
}

// Write writes rows as one record batch.
func Write(w io.Writer, rows []Row) error {
	mem := memory.DefaultAllocator
	b := array.NewRecordBuilder(mem, Schema)
	defer b.Release()
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
		b.Field(9).(*array.Float64Builder).Append(r.PerOpNs())
		b.Field(10).(*array.Int64Builder).Append(r.TimerNs)
		b.Field(11).(*array.StringBuilder).Append(r.Clock)
		b.Field(12).(*array.StringBuilder).Append(r.Telemetry)
		for p, rd := range [2]Reading{r.Before, r.After} {
			for i, v := range rd.values() {
				b.Field(telemetryColumns + 1 + p*readingColumnsPerPhase + i).(*array.Int64Builder).Append(v)
			}
		}
		b.Field(telemetryColumns + 1 + 2*readingColumnsPerPhase).(*array.StringBuilder).Append(r.Flags)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	fw, err := ipc.NewFileWriter(w, ipc.WithSchema(Schema), ipc.WithAllocator(mem))
	if err != nil {
		return err
	}
	if err := fw.Write(rec); err != nil {
		return err
	}
	return fw.Close()
}

// Limits for reading sample tables made elsewhere.
const (
	MaxMetadataBytes = 1 << 20
	MaxBodyBytes     = 1 << 30
)

// ReadFile reads every row of the sample table at path, checking the schema
// that each row's clock is known and that per_op_ns agrees with its
// clock's span over calls.
func ReadFile(path string, mem memory.Allocator) (rows []Row, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Arrow's IPC reader panics on some malformed flatbuffers; a foreign
	// file must give an error, not a crash.
	defer func() {
		if p := recover(); p != nil {
			rows, err = nil, fmt.Errorf("samples %s: arrow ipc: malformed file: %v", path, p)
		}
	}()
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := footer.Check(f, fi.Size(), MaxMetadataBytes); err != nil {
		return nil, fmt.Errorf("samples %s: arrow ipc: %w", path, err)
	}
	fr, err := ipc.NewFileReader(f, ipc.WithAllocator(mem), ipc.WithMetadataSizeLimit(MaxMetadataBytes), ipc.WithBodySizeLimit(MaxBodyBytes))
	if err != nil {
		return nil, fmt.Errorf("samples %s: arrow ipc: %w", path, err)
	}
	defer fr.Close()
	if !fr.Schema().Equal(Schema) {
		return nil, fmt.Errorf("samples %s: schema: want %s, got %s", path, Schema, fr.Schema())
	}
	for i := 0; i < fr.NumRecords(); i++ {
		rec, err := fr.RecordBatch(i)
		if err != nil {
			return nil, fmt.Errorf("samples %s: record batch %d: %w", path, i, err)
		}
		for c := 0; c < int(rec.NumCols()); c++ {
			if rec.Column(c).NullN() != 0 {
				return nil, fmt.Errorf("samples %s: column %s has nulls", path, Schema.Field(c).Name)
			}
		}
		recRows, perOp := rowsOf(rec)
		for j, r := range recRows {
			if err := r.check(perOp[j]); err != nil {
				return nil, fmt.Errorf("samples %s: row %d: %w", path, len(rows), err)
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// rowsOf decodes a record batch of Schema (no nulls): its rows and
// their per_op_ns column.
func rowsOf(rec arrow.RecordBatch) (rows []Row, perOp []float64) {
	visit := rec.Column(0).(*array.Int32)
	round := rec.Column(1).(*array.Int32)
	pos := rec.Column(2).(*array.Int32)
	cs := rec.Column(3).(*array.String)
	rt := rec.Column(4).(*array.String)
	kind := rec.Column(5).(*array.String)
	idx := rec.Column(6).(*array.Int32)
	calls := rec.Column(7).(*array.Int64)
	total := rec.Column(8).(*array.Int64)
	perop := rec.Column(9).(*array.Float64)
	timer := rec.Column(10).(*array.Int64)
	clock := rec.Column(11).(*array.String)
	tel := rec.Column(12).(*array.String)
	flags := rec.Column(telemetryColumns + 1 + 2*readingColumnsPerPhase).(*array.String)
	for j := 0; j < int(rec.NumRows()); j++ {
		// Clone: Arrow's strings alias its buffers, which mem may free.
		r := Row{Visit: visit.Value(j), Round: round.Value(j), Position: pos.Value(j), Case: strings.Clone(cs.Value(j)), Route: strings.Clone(rt.Value(j)),
			Kind: strings.Clone(kind.Value(j)), Index: idx.Value(j), Calls: calls.Value(j), TotalNs: total.Value(j), TimerNs: timer.Value(j),
			Clock: strings.Clone(clock.Value(j)), Telemetry: strings.Clone(tel.Value(j)), Flags: strings.Clone(flags.Value(j))}
		var rd [2][readingColumnsPerPhase]int64
		for p := range rd {
			for i := range rd[p] {
				rd[p][i] = rec.Column(telemetryColumns + 1 + p*readingColumnsPerPhase + i).(*array.Int64).Value(j)
			}
		}
		r.Before, r.After = readingOf(rd[0]), readingOf(rd[1])
		rows, perOp = append(rows, r), append(perOp, perop.Value(j))
	}
	return rows, perOp
}

// check: a row's telemetry, times, kind and clock are ones a replay
// writes, and its per_op_ns (perOp) is its clock's span over calls.
func (r Row) check(perOp float64) error {
	if err := r.checkTelemetry(); err != nil {
		return err
	}
	if r.TotalNs < 0 || r.TimerNs < 0 {
		return fmt.Errorf("total_ns=%d timer_ns=%d: want both >= 0", r.TotalNs, r.TimerNs)
	}
	if want := map[string]bool{"batch": r.Calls >= 1, "single": r.Calls == 1, "empty": r.Calls == 0, "novel": r.Calls >= 1, "graph": r.Calls >= 1 && r.Clock == ClockCUDA}; !want[r.Kind] {
		return fmt.Errorf("kind %q with %d calls: want batch (calls >= 1), single (1), empty (0), novel (calls >= 1), or graph (calls >= 1, clock %s)", r.Kind, r.Calls, ClockCUDA)
	}
	if r.Clock != ClockReplay && (r.Clock != ClockCUDA || r.Kind == KindEmpty) {
		return fmt.Errorf("clock %q with kind %q: want %q, or %q for a sample with calls", r.Clock, r.Kind, ClockReplay, ClockCUDA)
	}
	if perOp != r.PerOpNs() {
		return fmt.Errorf("per_op_ns %g disagrees with its clock's span (%s) over calls: %g", perOp, r.Clock, r.PerOpNs())
	}
	return nil
}

// checkTelemetry: a row's telemetry source is known, a CPU row's readings
// are zero, a GPU row's are -1 (unsupported) or more, and its flags are
// the ones its readings give.
func (r Row) checkTelemetry() error {
	switch r.Telemetry {
	case "":
		if r.Before != (Reading{}) || r.After != (Reading{}) {
			return fmt.Errorf("telemetry: readings without a source: want all zero")
		}
	case TelemetryNVML:
		for p, rd := range [2]Reading{r.Before, r.After} {
			for i, v := range rd.values() {
				if v < -1 {
					return fmt.Errorf("telemetry: %s%s = %d: want -1 (unsupported) or more", readingNames[i], [2]string{"_before", "_after"}[p], v)
				}
			}
		}
	default:
		return fmt.Errorf("telemetry %q: want \"\" (none) or %q", r.Telemetry, TelemetryNVML)
	}
	if want := Flags(r.Telemetry, r.Before, r.After); r.Flags != want {
		return fmt.Errorf("flags %q disagree with the readings, which give %q", r.Flags, want)
	}
	return nil
}
