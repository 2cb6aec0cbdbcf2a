package replay

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/artifacts/tensor"
	"github.com/tilepipe/tilepipe/internal/visit"
	"github.com/tilepipe/tilepipe/oracle"
)

// VisitFile renders the line-oriented visit description (protocol 2):
// the threads and the params, with the paths the timer sees.
func VisitFile(threads int, inputs []string, e *artifacts.Prepared, outputs []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tilepipe-visit 2\nthreads %d\n", threads)
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

// visitEnv is a visit's whole, scrubbed environment ([artifacts.Env]):
// the sandbox's own PATH, HOME and TMPDIR, the thread variables and the
// process route's recorded ones.
func visitEnv(threads int, extra map[string]string) []string {
	env := map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp"}
	maps.Copy(env, ThreadEnv(threads))
	maps.Copy(env, extra)
	return artifacts.Env(env)
}

// layout is where a visit's files are, outside and as the timer sees them.
type layout struct {
	dir, visitFile string   // outside: the visit's output directory and visit file
	outputs        []string // outside
	inVisit        string   // as the timer sees them
	inInputs       []string
	inOutputs      []string
	inProgram      string
	mounts         visit.Mounts
}

// layout places the visit: with a sandbox, the timer sees /visit/visit.txt,
// /visit/in/NAME.bin (read-only), /visit/out (writable), /visit/bin/PROGRAM
// (read-only) and its closure's directories, nothing else of this machine's
// files; without one, the outside paths.
func (r *replayer) layout(v artifacts.Visit, e *artifacts.Prepared, prog program) (*layout, error) {
	l := &layout{dir: filepath.Join(r.s.Dir(), workDir, fmt.Sprintf("visit-%d", v.Index))}
	l.visitFile = l.dir + ".txt"
	sandboxed := r.sandbox != nil
	for _, in := range e.Inputs {
		if !r.prep.Has(in.Digest) {
			return nil, fmt.Errorf("prepared: %s input %s: blob %s is not a verified layer", v.Case, in.Name, artifacts.Short(in.Digest))
		}
		src := r.prep.Store.Path(in.Digest)
		dst := src
		if sandboxed {
			dst = filepath.Join(visit.InsideIn, in.Name+".bin")
			l.mounts.ReadOnly = append(l.mounts.ReadOnly, visit.Bind{Src: src, Dst: dst})
		}
		l.inInputs = append(l.inInputs, dst)
	}
	outDir := l.dir
	if sandboxed {
		outDir = visit.InsideOut
		l.mounts.Writable = []visit.Bind{{Src: l.dir, Dst: visit.InsideOut}}
	}
	for _, o := range e.Outputs {
		l.outputs = append(l.outputs, filepath.Join(l.dir, o.Name+".bin"))
		l.inOutputs = append(l.inOutputs, filepath.Join(outDir, o.Name+".bin"))
	}
	l.inVisit, l.inProgram = l.visitFile, prog.path
	if !sandboxed {
		return l, nil
	}
	l.inVisit = filepath.Join(visit.InsideRoot, "visit.txt")
	// The timer's own name inside (its copy outside is named by digest).
	l.inProgram = filepath.Join(visit.InsideBin, "harness")
	if e.Kind == "process" {
		l.inProgram = filepath.Join(visit.InsideBin, filepath.Base(e.Program.Path))
	}
	exe := prog.path
	if e.Kind == "process" {
		exe = e.Process.Interpreter
	}
	var closure []string
	for _, f := range e.Closure {
		closure = append(closure, f.Path)
	}
	cm := visit.ClosureMounts(closure, exe)
	l.mounts.Links = cm.Links
	l.mounts.ReadOnly = append(append(cm.ReadOnly, l.mounts.ReadOnly...),
		visit.Bind{Src: l.visitFile, Dst: l.inVisit}, visit.Bind{Src: prog.path, Dst: l.inProgram})
	return l, nil
}

// visit runs one timer in its sandbox, drives its samples on replay's own
// clock and validates what it wrote.
func (r *replayer) visit(ctx context.Context, v artifacts.Visit, programs map[[2]string]program) (*artifacts.VisitResult, error) {
	k := [2]string{v.Case, v.Route}
	e, prog := r.entries[k], programs[k]
	vr := &artifacts.VisitResult{Visit: v, Session: len(r.sessions) - 1, Start: time.Now().UTC(), Threads: r.cfg.Threads}
	l, err := r.layout(v, e, prog)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{l.dir, l.visitFile} {
		if err := os.RemoveAll(p); err != nil { // a killed earlier attempt
			return nil, err
		}
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(l.dir)
	defer os.Remove(l.visitFile)
	if err := os.WriteFile(l.visitFile, []byte(VisitFile(r.cfg.Threads, l.inInputs, e, l.inOutputs)), 0o444); err != nil {
		return nil, err
	}
	var argv []string
	var extra map[string]string
	switch e.Kind {
	case "object":
		argv = []string{l.inProgram, "--visit", l.inVisit}
	case "process":
		argv = append(append([]string{e.Process.Interpreter, l.inProgram}, e.Process.Args...), "--visit", l.inVisit)
		extra = e.Env
	}
	dir := l.dir
	if r.sandbox != nil {
		dir = visit.InsideOut
	}
	spec := visit.Spec{Argv: argv, Env: visitEnv(r.cfg.Threads, extra), Dir: dir, Sandbox: r.sandbox, Mounts: l.mounts,
		Timeout: time.Duration(r.cfg.TimeoutS * float64(time.Second)), Threads: r.cfg.Threads, Limiter: r.limiter}
	sess, err := visit.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	vr.Argv = sess.Argv
	smps, calls, final, derr := r.drive(sess, vr, e)
	reason, out, cerr := sess.Close(derr, final)
	vr.End = time.Now().UTC()
	vr.Exit, vr.CPUNs, vr.WallNs, vr.Throttled = out.Exit, out.CPU.Nanoseconds(), out.Wall.Nanoseconds(), out.Throttled
	for _, o := range []struct {
		b  []byte
		to *artifacts.Digest
	}{{out.Stdout, &vr.Stdout}, {out.Stderr, &vr.Stderr}} {
		d, err := r.s.PutBytes(o.b, artifacts.MediaText)
		if err != nil {
			return nil, err
		}
		*o.to = d.Digest
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	fail := func(why string) (*artifacts.VisitResult, error) {
		vr.Status, vr.Reason = artifacts.StatusFailed, why
		return vr, nil
	}
	if cerr != nil {
		return nil, cerr
	}
	if reason != "" {
		return fail(reason)
	}
	vr.CallsPerSample = calls
	// Every output, in full, against the oracle.
	c := r.cases[v.Case]
	var got []oracle.Tensor
	for i, o := range e.Outputs {
		b, err := os.ReadFile(l.outputs[i])
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
	for _, s := range smps {
		rows = append(rows, samples.Row{Visit: int32(v.Index), Round: int32(v.Round), Position: int32(v.Position), Case: v.Case, Route: v.Route,
			Kind: s.Kind, Index: int32(s.Index), Calls: s.Calls, TotalNs: s.SpanNs, TimerNs: s.TimerNs})
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

// drive takes the validated report, the samples and the final report;
// final says whether the final report arrived.
func (r *replayer) drive(sess *visit.Session, vr *artifacts.VisitResult, e *artifacts.Prepared) ([]visit.Sample, int64, bool, error) {
	rep, err := sess.Validated()
	if err != nil {
		return nil, 0, false, err
	}
	vr.Checks, vr.OutputPolicy = rep.Checks, rep.OutputPolicy
	switch {
	case rep.Status != "ok":
		return nil, 0, false, &visit.Failure{Reason: rep.Reason}
	case rep.Threads != r.cfg.Threads:
		return nil, 0, false, &visit.Failure{Reason: fmt.Sprintf("timer report threads: ran with %d, want %d", rep.Threads, r.cfg.Threads)}
	case e.Process != nil && rep.OutputPolicy != e.Process.OutputPolicy:
		return nil, 0, false, &visit.Failure{Reason: fmt.Sprintf("timer report output_policy: %q, capture recorded %q", rep.OutputPolicy, e.Process.OutputPolicy)}
	}
	smps, calls, err := sess.Drive(visit.Plan{
		Warmup: time.Duration(r.cfg.WarmupMs * float64(time.Millisecond)), Sample: time.Duration(r.cfg.SampleMs * float64(time.Millisecond)),
		Samples: r.cfg.Samples, Singles: r.cfg.Singles, MaxCalls: maxCalls})
	if err != nil {
		return nil, 0, false, err
	}
	fin, err := sess.End()
	if err != nil {
		return nil, 0, false, err
	}
	vr.Checks = fin.Checks
	if fin.Status != "ok" {
		return nil, 0, true, &visit.Failure{Reason: fin.Reason}
	}
	return smps, calls, true, nil
}

// maxCalls bounds the calls of one sample (docs/protocol.md).
const maxCalls = 1 << 30

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
