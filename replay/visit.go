package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/artifacts/tensor"
	"github.com/tilepipe/tilepipe/oracle"
)

// timerReport is what a timer prints (docs/protocol.md, visit).
type timerReport struct {
	Protocol       int               `json:"protocol"`
	Status         string            `json:"status"`
	Reason         string            `json:"reason"`
	Checks         map[string]string `json:"checks"`
	CallsPerSample int64             `json:"calls_per_sample"`
	BatchNs        []int64           `json:"batch_ns"`
	SingleNs       []int64           `json:"single_ns"`
	Clock          string            `json:"clock"`
	Threads        int               `json:"threads"`
	OutputPolicy   string            `json:"output_policy"`
}

// VisitFile renders the line-oriented visit description.
func VisitFile(cfg artifacts.ReplayConfig, inputs []string, e *artifacts.Prepared, outputs []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tilepipe-visit 1\nwarmup_ms %g\nsample_ms %g\nsamples %d\nsingles %d\nthreads %d\n",
		cfg.WarmupMs, cfg.SampleMs, cfg.Samples, cfg.Singles, cfg.Threads)
	param := func(role string, name, dtype string, shape []int, bytes int64, path string) {
		fmt.Fprintf(&b, "param %s %s %s %d %s", role, name, dtype, bytes, path)
		for _, d := range shape {
			b.WriteString(" " + strconv.Itoa(d))
		}
		b.WriteByte('\n')
	}
	for i, in := range e.Inputs {
		param("input", in.Name, in.Dtype, in.Shape, in.Size, inputs[i])
	}
	for i, o := range e.Outputs {
		param("output", o.Name, o.Dtype, o.Shape, int64(o.Bytes()), outputs[i])
	}
	return b.String()
}

// ThreadEnv is the environment every visit gets so each library uses the
// configured number of threads.
func ThreadEnv(threads int) map[string]string {
	n := strconv.Itoa(threads)
	return map[string]string{"OMP_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n, "MKL_NUM_THREADS": n, "HL_NUM_THREADS": n}
}

// visit runs one timer process and validates what it wrote.
func (r *replayer) visit(ctx context.Context, v artifacts.Visit, programs map[[2]string]program) (*artifacts.VisitResult, error) {
	k := [2]string{v.Case, v.Route}
	e, prog := r.entries[k], programs[k]
	vr := &artifacts.VisitResult{Visit: v, Session: len(r.sessions) - 1, Start: time.Now().UTC()}
	dir := filepath.Join(r.s.Dir(), workDir, fmt.Sprintf("visit-%d", v.Index))
	if err := os.RemoveAll(dir); err != nil { // a killed earlier attempt
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var inputs, outputs []string
	for _, in := range e.Inputs {
		if !r.prep.Has(in.Digest) {
			return nil, fmt.Errorf("prepared: %s input %s: blob %s is not a verified layer", v.Case, in.Name, artifacts.Short(in.Digest))
		}
		inputs = append(inputs, r.prep.Store.Path(in.Digest))
	}
	for _, o := range e.Outputs {
		outputs = append(outputs, filepath.Join(dir, o.Name+".bin"))
	}
	vf := filepath.Join(dir, "visit.txt")
	if err := os.WriteFile(vf, []byte(VisitFile(r.cfg.ReplayConfig, inputs, e, outputs)), 0o444); err != nil {
		return nil, err
	}
	env := ThreadEnv(r.cfg.Threads)
	var argv []string
	switch e.Kind {
	case "object":
		argv = []string{prog.path, "--visit", vf}
	case "process":
		argv = append(append([]string{e.Process.Interpreter, prog.path}, e.Process.Args...), "--visit", vf)
		for kk, vv := range e.Env {
			env[kk] = vv
		}
	}
	timeout := time.Duration(r.cfg.TimeoutS * float64(time.Second))
	cmd, out, reason, err := r.s.Run(ctx, argv, dir, env, timeout)
	vr.End = time.Now().UTC()
	if err != nil {
		return nil, err
	}
	vr.Stdout, vr.Stderr, vr.Exit = cmd.Stdout, cmd.Stderr, cmd.Exit
	fail := func(why string) (*artifacts.VisitResult, error) {
		vr.Status, vr.Reason = artifacts.StatusFailed, why
		return vr, nil
	}
	if reason != "" {
		return fail(reason)
	}
	var rep timerReport
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return fail(fmt.Sprintf("timer report: want one JSON object (docs/protocol.md): %v", err))
	}
	vr.Checks, vr.CallsPerSample, vr.Threads, vr.OutputPolicy = rep.Checks, rep.CallsPerSample, rep.Threads, rep.OutputPolicy
	if rep.Protocol != 1 {
		return fail(fmt.Sprintf("timer report protocol: want 1, got %d", rep.Protocol))
	}
	if rep.Status != "ok" {
		if rep.Reason == "" {
			rep.Reason = "timer reported status " + strconv.Quote(rep.Status) + " without a reason"
		}
		return fail(rep.Reason)
	}
	switch {
	case len(rep.BatchNs) != r.cfg.Samples || len(rep.SingleNs) != r.cfg.Singles:
		return fail(fmt.Sprintf("timer report: %d batch and %d single samples, want %d and %d", len(rep.BatchNs), len(rep.SingleNs), r.cfg.Samples, r.cfg.Singles))
	case rep.CallsPerSample < 1:
		return fail(fmt.Sprintf("timer report calls_per_sample: want >= 1, got %d", rep.CallsPerSample))
	case rep.Threads != r.cfg.Threads:
		return fail(fmt.Sprintf("timer report threads: ran with %d, want %d", rep.Threads, r.cfg.Threads))
	case e.Process != nil && rep.OutputPolicy != e.Process.OutputPolicy:
		return fail(fmt.Sprintf("timer report output_policy: %q, capture recorded %q", rep.OutputPolicy, e.Process.OutputPolicy))
	}
	// Every output, in full, against the oracle.
	c := r.cases[v.Case]
	var got []oracle.Tensor
	for i, o := range e.Outputs {
		b, err := os.ReadFile(outputs[i])
		if err != nil {
			return fail(fmt.Sprintf("output %s: %v", o.Name, err))
		}
		if len(b) != o.Bytes() {
			return fail(fmt.Sprintf("output %s: %d bytes, want %d", o.Name, len(b), o.Bytes()))
		}
		m := tensor.Meta{Name: o.Name, Role: "output", Dtype: o.Dtype, Shape: o.Shape, Case: v.Case, Generator: c.Generator, Seed: c.Case.Seed}
		d, err := artifacts.PutTensor(r.s, m, b)
		if err != nil {
			return nil, err
		}
		r.s.Name(fmt.Sprintf("visits/%d/%s.arrow", v.Index, o.Name), d)
		vr.Outputs = append(vr.Outputs, artifacts.TensorRef{Name: o.Name, Role: "output", Dtype: o.Dtype, Shape: o.Shape, Digest: d.Digest, Size: d.Size})
		t, err := oracle.Decode(o.Dtype, b)
		if err != nil {
			return fail(fmt.Sprintf("output %s: %v", o.Name, err))
		}
		got = append(got, t)
	}
	exp, err := r.oracle.get(c)
	if err != nil {
		return nil, err
	}
	verdict := oracle.Compare(c.Case, exp, got)
	vr.MaxErrRatio = verdict.MaxRatio
	if !verdict.Pass {
		return fail("oracle: " + verdict.Reason)
	}
	var rows []samples.Row
	for i, ns := range rep.BatchNs {
		rows = append(rows, samples.Row{Visit: int32(v.Index), Round: int32(v.Round), Position: int32(v.Position), Case: v.Case, Route: v.Route, Kind: "batch", Index: int32(i), Calls: rep.CallsPerSample, TotalNs: ns})
	}
	for i, ns := range rep.SingleNs {
		rows = append(rows, samples.Row{Visit: int32(v.Index), Round: int32(v.Round), Position: int32(v.Position), Case: v.Case, Route: v.Route, Kind: "single", Index: int32(i), Calls: 1, TotalNs: ns})
	}
	for _, row := range rows {
		if row.TotalNs <= 0 {
			return fail(fmt.Sprintf("timer report: non-positive sample %d ns", row.TotalNs))
		}
	}
	sd, err := artifacts.PutSamples(r.s, rows)
	if err != nil {
		return nil, err
	}
	r.s.Name(fmt.Sprintf("visits/%d/samples.arrow", v.Index), sd)
	vr.Samples = sd.Digest
	vr.Status = artifacts.StatusPassed
	return vr, nil
}

// oracleCache holds each case's expected outputs and bounds from the
// capture packet (verified when the capture was opened).
type oracleCache struct {
	cap  *artifacts.Stage
	byID map[string][]oracle.Expected
	held []*tensor.Tensor
}

func newOracleCache(cap *artifacts.Stage) *oracleCache {
	return &oracleCache{cap: cap, byID: map[string][]oracle.Expected{}}
}

// get returns the case's expected outputs: a float output has an f64
// expected and an f64 bound tensor, an index output an i64 expected tensor
// and no bound (bounds are matched to outputs by name).
func (o *oracleCache) get(c *artifacts.CapturedCase) ([]oracle.Expected, error) {
	if v, ok := o.byID[c.Case.ID]; ok {
		return v, nil
	}
	load := func(ref artifacts.TensorRef, dtype string) (*tensor.Tensor, error) {
		if !o.cap.Has(ref.Digest) {
			return nil, fmt.Errorf("capture: case %s %s %s: blob %s is not a verified layer", c.Case.ID, ref.Role, ref.Name, artifacts.Short(ref.Digest))
		}
		t, err := tensor.ReadFile(o.cap.Store.Path(ref.Digest), nil)
		if err != nil {
			return nil, err
		}
		o.held = append(o.held, t)
		if t.Meta.Dtype != dtype || t.Meta.Role != ref.Role || t.Meta.Case != c.Case.ID {
			return nil, fmt.Errorf("capture: case %s %s %s: tensor metadata %+v disagrees with the capture document", c.Case.ID, ref.Role, ref.Name, t.Meta)
		}
		return t, nil
	}
	bounds := map[string]artifacts.TensorRef{}
	for _, ref := range c.Packet.Bound {
		bounds[ref.Name] = ref
	}
	var exp []oracle.Expected
	for _, ref := range c.Packet.Expected {
		if ref.Dtype == "i64" {
			t, err := load(ref, "i64")
			if err != nil {
				return nil, err
			}
			exp = append(exp, oracle.Expected{WantI: t.Int64()})
			continue
		}
		t, err := load(ref, "f64")
		if err != nil {
			return nil, err
		}
		bref, ok := bounds[ref.Name]
		if !ok {
			return nil, fmt.Errorf("capture: case %s: expected %s has no bound tensor", c.Case.ID, ref.Name)
		}
		b, err := load(bref, "f64")
		if err != nil {
			return nil, err
		}
		exp = append(exp, oracle.Expected{Want: t.Float64(), Bound: b.Float64()})
	}
	o.byID[c.Case.ID] = exp
	return exp, nil
}

func (o *oracleCache) release() {
	for _, t := range o.held {
		t.Release()
	}
}
