package replay

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/artifacts/tensor"
	"github.com/tilepipe/tilepipe/internal/load"
	"github.com/tilepipe/tilepipe/internal/record"
	"github.com/tilepipe/tilepipe/internal/sets"
	"github.com/tilepipe/tilepipe/internal/telemetry"
	"github.com/tilepipe/tilepipe/internal/visit"
	"github.com/tilepipe/tilepipe/oracle"
	"github.com/tilepipe/tilepipe/report"
	"github.com/tilepipe/tilepipe/stats"
	"golang.org/x/sync/errgroup"
)

// VisitFile renders the line-oriented visit description (protocol 3): the
// threads, the pools and the params, each with the descriptors of its
// memory files (5, 6 for the first param's warm and fresh files, 7, 8 for
// the next, ...).
//
// A cubin entry's visit also names its kernel as the timer sees it:
// `cubin PATH` and `launch PATH` (kernel holds the two paths). A GPU
// visit's file says its L2 policy, `l2 warm` or `l2 flush` (l2; "" for a
// CPU visit, whose timer knows no such key), and with graph samples the
// graph's calls, `graph N` (graph; 0 for none).
func VisitFile(threads, warm, fresh int, e *artifacts.Prepared, kernel []string, l2 string, graph int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tilepipe-visit 3\nthreads %d\npool warm %d %d\npool fresh %d %d\n", threads, warm, visit.WarmGap, fresh, visit.FreshGap)
	if len(kernel) == 2 {
		fmt.Fprintf(&b, "cubin %s\nlaunch %s\n", kernel[0], kernel[1])
	}
	if l2 != "" {
		fmt.Fprintf(&b, "l2 %s\n", l2)
	}
	if graph > 0 {
		fmt.Fprintf(&b, "graph %d\n", graph)
	}
	fd := 5
	param := func(role string, name, dtype string, shape []int, bytes int64) {
		fmt.Fprintf(&b, "param %s %s %s %d %d %d", role, name, dtype, bytes, fd, fd+1)
		fd += 2
		for _, d := range shape {
			b.WriteString(" " + strconv.Itoa(d))
		}
		b.WriteByte('\n')
	}
	for _, in := range e.Inputs {
		param("input", in.Name, in.Dtype, in.Shape, in.Size)
	}
	for _, o := range e.Outputs {
		param("output", o.Name, o.Dtype, o.Shape, int64(o.Bytes()))
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
// the sandbox's own PATH, HOME and TMPDIR, the thread variables, the
// visit's allocator fill byte and the process route's recorded ones.
func visitEnv(threads, perturb int, extra map[string]string) []string {
	env := map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "MALLOC_PERTURB_": strconv.Itoa(perturb)}
	maps.Copy(env, ThreadEnv(threads))
	maps.Copy(env, extra)
	return artifacts.Env(env)
}

// layout is where a visit's files are, outside and as the timer sees them.
type layout struct {
	dir, visitFile string // outside: the visit's working directory and visit file
	inVisit        string // as the timer sees them
	inProgram      string
	inKernel       []string // a cubin entry's cubin and launch files
	cache, inCache string   // a process entry's copy of its cache files ("": none)

	mounts visit.Mounts
}

// layout places the visit: with a sandbox, the timer sees /visit/visit.txt,
// /visit/out (writable, empty), /visit/bin/PROGRAM (read-only) and its
// closure's directories, nothing else of this machine's files; without
// one, the outside paths. Its buffers are memory files on fd 5 and up.
func (r *replayer) layout(v artifacts.Visit, e *artifacts.Prepared, prog program) *layout {
	l := &layout{dir: filepath.Join(r.s.Dir(), workDir, fmt.Sprintf("visit-%d", v.Index))}
	l.visitFile = l.dir + ".txt"
	l.inVisit, l.inProgram, l.inKernel = l.visitFile, prog.path, prog.kernel
	if len(e.Data) > 0 {
		l.cache, l.inCache = l.dir+".cache", l.dir+".cache"
	}
	if r.sandbox == nil {
		return l
	}
	if l.cache != "" {
		l.inCache = visit.InsideCache
		l.mounts.Writable = append(l.mounts.Writable, visit.Bind{Src: l.cache, Dst: visit.InsideCache})
	}
	if len(prog.kernel) == 2 {
		l.inKernel = []string{filepath.Join(visit.InsideBin, "kernel.cubin"), filepath.Join(visit.InsideBin, "launch.txt")}
		for i, p := range prog.kernel {
			l.mounts.ReadOnly = append(l.mounts.ReadOnly, visit.Bind{Src: p, Dst: l.inKernel[i]})
		}
	}
	if r.cases[v.Case].Case.DeviceOf() == oracle.DeviceCUDA {
		// A GPU visit sees the GPU's device nodes, nothing else of /dev.
		l.mounts.Devices = r.gpuDevices
	}
	l.mounts.Writable = append(l.mounts.Writable, visit.Bind{Src: l.dir, Dst: visit.InsideOut})
	l.inVisit = filepath.Join(visit.InsideRoot, "visit.txt")
	// The timer's own name inside (its copy outside is named by digest).
	l.inProgram = filepath.Join(visit.InsideBin, "harness")
	if e.Kind == artifacts.KindProcess {
		l.inProgram = filepath.Join(visit.InsideBin, filepath.Base(e.Program.Path))
	}
	exe := prog.path
	if e.Kind == artifacts.KindProcess {
		exe = e.Process.Interpreter
	}
	var closure []string
	for _, f := range e.Closure {
		closure = append(closure, f.Path)
	}
	cm := visit.ClosureMounts(closure, exe)
	l.mounts.Links = cm.Links
	l.mounts.ReadOnly = append(append(l.mounts.ReadOnly, cm.ReadOnly...), visit.Bind{Src: l.visitFile, Dst: l.inVisit}, visit.Bind{Src: prog.path, Dst: l.inProgram})
	return l
}

// buffers are one visit's memory files: the round's sealed warm inputs and
// the visit's own outputs, per param in signature order. Its fresh files
// are its novel slots (visit protocol 4): input files replay rewrites
// before each novel sample, outputs it fills before each.
type buffers struct {
	in                *roundInputs
	warmOut, freshOut []*visit.MemFile
	novelIn           []*visit.MemFile // per input param
	params            []oracle.Param   // outputs
	validated         [][]byte         // per output: every warm set's validated bytes
	fill              uint64
	novel             *artifacts.NovelRecord
	checked           [][]byte // per output: the checked novel calls' outputs, in novel.Checked's order
	checkLimit        int64    // the most novel calls the rule judges (sets.Rule.Checks)
}

// slots is the visit's novel sets.
func (b *buffers) slots() int { return b.freshOut[0].Layout.Sets }

func (b *buffers) files() []*os.File {
	var fs []*os.File
	for i := range b.in.warmFiles {
		fs = append(fs, b.in.warmFiles[i].File, b.novelIn[i].File)
	}
	for i := range b.warmOut {
		fs = append(fs, b.warmOut[i].File, b.freshOut[i].File)
	}
	return fs
}

func (b *buffers) close() {
	for _, m := range append(append(slices.Clone(b.warmOut), b.freshOut...), b.novelIn...) {
		m.Close()
	}
}

// newBuffers makes a visit's files: the outputs of the round's warm sets,
// and novel slots, as many as one novel sample of the case holds
// ([sets.Rule.Slots]).
func (r *replayer) newBuffers(in *roundInputs, e *artifacts.Prepared) (*buffers, error) {
	b := &buffers{in: in}
	var draw [16]byte
	if _, err := rand.Read(draw[:]); err != nil {
		return nil, err
	}
	b.fill = binary.LittleEndian.Uint64(draw[:])
	cc := r.cases[e.Case]
	fresh := sets.CurrentRule.Slots(cc.Case.DeviceOf(), cc.Signature)
	b.checkLimit = sets.CurrentRule.Checks(cc.Case, cc.Signature)
	for _, p := range cc.Signature {
		if p.Role != oracle.RoleInput {
			continue
		}
		m, err := visit.NewNovelInput(p.Name, visit.NewLayout(visit.PoolFresh, fresh, p.Bytes()))
		if err != nil {
			b.close()
			return nil, err
		}
		b.novelIn = append(b.novelIn, m)
	}
	for _, o := range e.Outputs {
		w, err := visit.NewOutput(o.Name, visit.NewLayout(visit.PoolWarm, len(in.warm), o.Bytes()))
		if err != nil {
			b.close()
			return nil, err
		}
		b.warmOut = append(b.warmOut, w)
		f, err := visit.NewOutput(o.Name, visit.NewLayout(visit.PoolFresh, fresh, o.Bytes()))
		if err != nil {
			b.close()
			return nil, err
		}
		f.Fill(visit.FillPattern(o.Dtype, b.fill))
		b.freshOut = append(b.freshOut, f)
		b.params = append(b.params, oracle.Param{Name: o.Name, Role: oracle.RoleOutput, Dtype: o.Dtype, Shape: o.Shape})
	}
	return b, nil
}

// checkCanaries checks every output file's canary bytes.
func (b *buffers) checkCanaries() error {
	for _, m := range append(append(slices.Clone(b.warmOut), b.freshOut...), b.novelIn...) {
		if err := m.CheckCanary(); err != nil {
			return err
		}
	}
	return nil
}

// afterValidation reads every warm set's outputs, keeps them and judges
// them against their oracle, then overwrites them with the visit's fill.
func (b *buffers) afterValidation(vr *artifacts.VisitResult) error {
	if err := b.checkCanaries(); err != nil {
		return err
	}
	b.validated = make([][]byte, len(b.warmOut))
	for i, m := range b.warmOut {
		for s := range m.Layout.Sets {
			b.validated[i] = append(b.validated[i], m.Set(s)...)
		}
	}
	for s, set := range b.in.warm {
		raw := make([][]byte, len(b.warmOut))
		for i, m := range b.warmOut {
			raw[i] = m.Set(s)
		}
		vd, err := set.Judge(b.params, raw)
		if err != nil {
			return err
		}
		vr.MaxErrRatio = max(vr.MaxErrRatio, vd.MaxRatio)
		if !vd.Pass {
			return &visit.Failure{Reason: fmt.Sprintf("oracle: warm set %d: %s", s, vd.Reason)}
		}
	}
	for i, m := range b.warmOut {
		m.Fill(visit.FillPattern(b.params[i].Dtype, b.fill))
	}
	return nil
}

// runNovel takes a visit's novel samples (visit protocol 4,
// docs/protocol.md): it freezes the visit, and for each sample writes the
// sample's novel sets into the slots and a fill drawn for the sample over
// their outputs, times the sample from before the thaw to the confirmed
// freeze, finds any output element still holding the fill, and draws the
// calls it will judge in full, keeping their outputs; then it thaws the
// visit.
//
// With a stager (a GPU case under novel rule 3) the slots reach the device
// through replay's monitor, never through the visit: it gets the fresh
// files once, makes each sample's allocation while the visit is frozen
// and hands its descriptor over with the command; the span ends after its
// idle probe; then it checks the allocation and brings the outputs down
// into the files (docs/gpu-clock.md, "The stager").
func (b *buffers) runNovel(sess *visit.Session, count int, calls int64, clock string, st *stager) (_ []visit.Sample, err error) {
	if err := sess.Freeze(); err != nil {
		return nil, err
	}
	if st != nil {
		if err := st.open(b); err != nil {
			return nil, err
		}
		defer func() {
			if cerr := st.close(); err == nil && cerr != nil {
				err = cerr
			}
		}()
	}
	n := visit.NovelCalls(calls, b.slots())
	b.novel = &artifacts.NovelRecord{Samples: count, Calls: n}
	b.checked = make([][]byte, len(b.freshOut))
	per := visit.ChecksPerSample(count, n, b.checkLimit)
	var out []visit.Sample
	for i := range count {
		smp, err := b.novelSample(sess, i, n, per, clock, st)
		if err != nil {
			return nil, err
		}
		out = append(out, smp)
	}
	// Every sample's outputs are read. Where replay's span is the time
	// (the CPU; a GPU's novel samples under rule 3), the idle visit's
	// freeze cycles, for the report's bracket share (docs/protocol.md,
	// "What a sample measures"). Then thawed again as it was found: what
	// follows (graph samples, the final report) talks to a running timer.
	if clock == samples.ClockReplay {
		fz, err := sess.FreezeCycle(visit.FreezeCycles)
		if err != nil {
			return nil, err
		}
		b.novel.FreezeNs = fz.Nanoseconds()
	}
	return out, sess.Thaw()
}

// novelSample takes novel sample i of n calls of a frozen visit: its sets
// and a fill drawn for it written, its slots staged (st, on a GPU), the
// sample timed, every output element checked for the fill, and per calls
// drawn to be judged, their outputs kept.
func (b *buffers) novelSample(sess *visit.Session, i int, n, per int64, clock string, st *stager) (visit.Sample, error) {
	batch, err := b.in.novelSets(int64(i)*n, n)
	if err != nil {
		return visit.Sample{}, err
	}
	for j, set := range batch {
		for k, m := range b.novelIn {
			if err := m.Write(j, oracle.Encode(set.Inputs[k])); err != nil {
				return visit.Sample{}, err
			}
		}
	}
	var draw [8]byte
	if _, err := rand.Read(draw[:]); err != nil {
		return visit.Sample{}, err
	}
	fills := make([][]byte, len(b.freshOut))
	for k, m := range b.freshOut {
		fills[k] = visit.FillPattern(b.params[k].Dtype, binary.LittleEndian.Uint64(draw[:]))
		m.FillSets(int(n), fills[k])
	}
	var staging *visit.Staging
	if st != nil {
		if staging, err = st.stage(int64(i), n); err != nil {
			return visit.Sample{}, err
		}
	}
	span, tn, err := sess.NovelStaged(n, staging)
	if staging != nil {
		staging.Slots.Close()
		if err == nil {
			err = st.verdict()
		}
	}
	if err != nil {
		return visit.Sample{}, err
	}
	smp := visit.Sample{Kind: samples.KindNovel, Index: i, Calls: n, SpanNs: span.Nanoseconds(), TimerNs: tn, Clock: clock, Tel: sess.LastTelemetry()}
	if err := visit.CheckClock(smp); err != nil {
		return visit.Sample{}, err
	}
	for j := range n {
		for k, m := range b.freshOut {
			if e := m.FirstEqual(int(j), fills[k]); e >= 0 {
				return visit.Sample{}, &visit.Failure{Reason: fmt.Sprintf("output_not_overwritten: %s novel sample %d call %d element %d", b.params[k].Name, i, j, e)}
			}
		}
	}
	// Drawn now, after the sample's freeze: no call could know whether it
	// would be judged.
	pick, err := drawCalls(n, per)
	if err != nil {
		return visit.Sample{}, err
	}
	for _, j := range pick {
		b.novel.Checked = append(b.novel.Checked, int64(i)*n+j)
		for k, m := range b.freshOut {
			b.checked[k] = append(b.checked[k], m.Set(int(j))...)
		}
	}
	return smp, nil
}

// stager is a GPU visit's monitor staging its novel slots (novel rule 3,
// docs/gpu-clock.md, "The stager"); its idle probes count in probes.
type stager struct {
	m      *telemetry.Monitor
	probes *telemetry.Probes
	flush  bool // the visit's "l2 flush": the monitor writes the L2 over after each upload
	// The last sample's outcome: its in-span probe's verdict and the
	// monitor's reason.
	busy   error
	reason string
}

// fail is a failure of the monitor, which the visit fails with (as a
// telemetry error fails it).
func (st *stager) fail(err error) error { return &visit.Failure{Reason: "stager: " + err.Error()} }

// open hands the monitor the visit's fresh files, in the visit file's
// param order: the inputs, then the outputs.
func (st *stager) open(b *buffers) error {
	var files []telemetry.StageFile
	for _, m := range b.novelIn {
		files = append(files, telemetry.StageFile{Name: m.Name, Role: oracle.RoleInput, Bytes: int64(m.Layout.Bytes), File: m.File})
	}
	for _, m := range b.freshOut {
		files = append(files, telemetry.StageFile{Name: m.Name, Role: oracle.RoleOutput, Bytes: int64(m.Layout.Bytes), File: m.File})
	}
	if _, err := st.m.Open(b.slots(), visit.FreshGap, files); err != nil {
		return st.fail(err)
	}
	return nil
}

// stage makes sample i's allocation of n calls (the visit is frozen and
// its files written) and the session's staging of it.
func (st *stager) stage(i, n int64) (*visit.Staging, error) {
	seq := i + 1
	sg, err := st.m.Stage(seq, n, st.flush)
	if err != nil {
		return nil, st.fail(err)
	}
	st.busy, st.reason = nil, ""
	return &visit.Staging{
		Slots: sg.File,
		// The probe's verdict waits until the allocation is down: the
		// monitor answers the probe and goes on unstaging.
		Probe: func() error {
			if err := st.m.Probe(seq); err != nil {
				return st.fail(err)
			}
			st.busy = st.probes.Add(st.m.IdleNs, st.m.IdleWaitNs)
			return nil
		},
		Unstage: func() error {
			r, err := st.m.Unstage(seq)
			if err != nil {
				return st.fail(err)
			}
			st.reason = r
			return nil
		},
	}, nil
}

// verdict is the last sample's: work left running on the GPU after its
// answer first (it could have changed what came down), then what the
// monitor found in the allocation.
func (st *stager) verdict() error {
	switch {
	case st.busy != nil:
		return &visit.Failure{Reason: st.busy.Error()}
	case st.reason != "":
		return &visit.Failure{Reason: st.reason}
	}
	return nil
}

// close releases the files and any allocation the monitor still holds
// (after a failed sample too), unless the monitor has ended.
func (st *stager) close() error {
	if !st.m.Alive() {
		return nil
	}
	if err := st.m.CloseFiles(); err != nil {
		return st.fail(err)
	}
	return nil
}

// drawCalls draws k of the calls 0 to n-1 uniformly from crypto/rand,
// in increasing order.
func drawCalls(n, k int64) ([]int64, error) {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, err
	}
	g := mrand.New(mrand.NewChaCha8(seed))
	all := make([]int64, n)
	for i := range all {
		all[i] = int64(i)
	}
	for i := range k { // the first k of a Fisher-Yates shuffle
		j := i + g.Int64N(n-i)
		all[i], all[j] = all[j], all[i]
	}
	pick := all[:k]
	slices.Sort(pick)
	return pick, nil
}

// judgeNovel judges every checked novel call's outputs against its set's
// oracle.
func (b *buffers) judgeNovel(vr *artifacts.VisitResult) error {
	// The oracles first, on every core: no visit runs now.
	all := make([]*sets.Set, len(b.novel.Checked))
	var eg errgroup.Group
	eg.SetLimit(runtime.NumCPU())
	for c, call := range b.novel.Checked {
		set, err := b.in.novelSet(call)
		if err != nil {
			return err
		}
		all[c] = set
		eg.Go(func() error {
			_, err := set.Expected()
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return err
	}
	for c, g := range b.novel.Checked {
		set := all[c]
		raw := make([][]byte, len(b.freshOut))
		for k, m := range b.freshOut {
			raw[k] = b.checked[k][c*m.Layout.Bytes : (c+1)*m.Layout.Bytes]
		}
		vd, err := set.Judge(b.params, raw)
		if err != nil {
			return err
		}
		vr.MaxErrRatio = max(vr.MaxErrRatio, vd.MaxRatio)
		if !vd.Pass {
			return &visit.Failure{Reason: fmt.Sprintf("oracle: novel sample %d call %d: %s", g/b.novel.Calls, g%b.novel.Calls, vd.Reason)}
		}
	}
	return nil
}

// afterTiming checks what the timed calls left: every warm set's outputs
// byte for byte what validation produced, and every canary.
func (b *buffers) afterTiming(vr *artifacts.VisitResult) error {
	if err := b.checkCanaries(); err != nil {
		return err
	}
	for i, m := range b.warmOut {
		elem := oracle.DtypeSize(b.params[i].Dtype)
		for s := range m.Layout.Sets {
			want := b.validated[i][s*m.Layout.Bytes : (s+1)*m.Layout.Bytes]
			if e := m.FirstDiff(s, want, elem); e >= 0 {
				return &visit.Failure{Reason: fmt.Sprintf("timed_output_mismatch: set %d output %s element %d", s, b.params[i].Name, e)}
			}
		}
	}
	return nil
}

// visit runs one timer in its sandbox, drives its samples on replay's own
// clock and checks what it computed: its inputs and buffers, the GPU's
// side (gpuSide), the visit's files (placeVisit), the run (runTimer),
// then what the run left (finishVisit).
func (r *replayer) visit(ctx context.Context, v artifacts.Visit, programs map[artifacts.Pair]program) (*artifacts.VisitResult, error) {
	k := v.Pair()
	e, prog := r.entries[k], programs[k]
	vr := &artifacts.VisitResult{Visit: v, Session: len(r.sessions) - 1, Start: time.Now().UTC(), Threads: r.cfg.Threads}
	r.phases.start()
	defer func() {
		r.phases.mark("store")
		r.cfg.Progress.Printf("replay: visit %d took %s", v.Index, r.phases.String())
	}()
	in, err := r.inputs.get(v.Round, r.cases[v.Case])
	if err != nil {
		return nil, err
	}
	bufs, err := r.newBuffers(in, e)
	if err != nil {
		return nil, err
	}
	defer bufs.close()
	vr.Sets, vr.FreshSets, vr.Fill = len(in.warm), bufs.slots(), fmt.Sprintf("%016x", bufs.fill)
	vr.MallocPerturb = r.inputs.seeds.Perturb(v.Round)
	var g *gpuSide
	if r.cases[v.Case].Case.DeviceOf() == oracle.DeviceCUDA {
		var why string
		if g, why = r.gpuSide(); why != "" {
			vr.Status, vr.Reason, vr.End = artifacts.StatusFailed, why, time.Now().UTC()
			return vr, nil
		}
		defer func() {
			vr.GPUIdle = &artifacts.GPUIdle{Probes: g.probes.N, WorstNs: g.probes.WorstNs, WorstWaitNs: g.probes.WorstWaitNs}
		}()
	}
	l, cleanup, err := r.placeVisit(v, e, prog, in, bufs)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	r.phases.mark("setup")
	smps, calls, reason, err := r.runTimer(ctx, vr, e, l, bufs, g)
	if err != nil {
		return nil, err
	}
	vr.CallsPerSample = calls
	if reason == "" && l.cache != "" {
		reason = cacheChanged(l.cache, e.Data)
	}
	if reason != "" {
		vr.Status, vr.Reason = artifacts.StatusFailed, reason
		return vr, nil
	}
	return r.finishVisit(vr, in, bufs, smps)
}

// gpuSide is a GPU visit's telemetry: the reading around every sample
// (with the idle probe), the visit's probes, and the stager of its novel
// slots (replay times by novel rule 3, sets.CurrentRule, which stages
// every GPU case's: the CUDA timer and the torch wrapper take no other).
type gpuSide struct {
	tel    func() (samples.Reading, error)
	probes *telemetry.Probes
	st     *stager
}

// gpuSide readies a GPU visit: the GPU checked after an earlier CUDA
// error, the monitor running. A non-empty reason fails the visit before
// it starts (no GPU, a dead GPU, no telemetry).
func (r *replayer) gpuSide() (*gpuSide, string) {
	if r.gpuSuspect != "" && r.gpuErr == nil && r.gpuDead == "" {
		r.healthCheck()
	}
	switch {
	case r.gpuErr != nil:
		return nil, "no GPU: " + r.gpuErr.Error()
	case r.gpuDead != "":
		return nil, r.gpuDead
	}
	m, err := r.telemetry()
	if err != nil {
		return nil, "no telemetry: " + err.Error()
	}
	// Every reading probes the GPU for work of the visit outside its
	// samples (telemetry.BusyNs), and so does the end of every staged
	// novel sample.
	g := &gpuSide{probes: &telemetry.Probes{}}
	g.tel = func() (samples.Reading, error) { return m.Idle(g.probes) }
	g.st = &stager{m: m, probes: g.probes, flush: r.cfg.L2 == "flush"}
	return g, ""
}

// placeVisit makes the visit's working directory and writes its visit
// file (a killed earlier attempt's removed first); cleanup removes both.
func (r *replayer) placeVisit(v artifacts.Visit, e *artifacts.Prepared, prog program, in *roundInputs, bufs *buffers) (*layout, func(), error) {
	l := r.layout(v, e, prog)
	for _, p := range []string{l.dir, l.visitFile, l.cache} {
		if err := os.RemoveAll(p); err != nil {
			return nil, nil, err
		}
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, nil, err
	}
	cleanup := func() {
		os.RemoveAll(l.dir)
		os.Remove(l.visitFile)
		if l.cache != "" {
			os.RemoveAll(l.cache)
		}
	}
	if err := r.copyCache(e, l.cache); err != nil {
		cleanup()
		return nil, nil, err
	}
	l2 := ""
	if r.cases[v.Case].Case.DeviceOf() == oracle.DeviceCUDA {
		l2 = r.cfg.L2
	}
	if err := os.WriteFile(l.visitFile, []byte(VisitFile(r.cfg.Threads, len(in.warm), bufs.slots(), e, l.inKernel, l2, r.graphBatch(v.Case, e))), 0o444); err != nil {
		cleanup()
		return nil, nil, err
	}
	return l, cleanup, nil
}

// graphBatch is the calls of the CUDA graph whose replays a visit of
// case c by entry e times in its graph samples (config.graphBatch), or 0
// where it takes none: a CPU case, a replay without --graph-batch, or an
// entry whose calls replay CUDA graphs of their own
// ([record.TakesGraphs], which the audit's records check applies too).
func (r *replayer) graphBatch(c string, e *artifacts.Prepared) int {
	if record.TakesGraphs(r.cfg.ReplayConfig, r.cases[c].Case.DeviceOf(), e.OwnGraphs) {
		return r.cfg.GraphBatch
	}
	return 0
}

// timerArgv is how the visit's timer is started, as the sandbox sees it,
// and the entry's recorded environment.
func timerArgv(e *artifacts.Prepared, l *layout) ([]string, map[string]string, error) {
	switch e.Kind {
	case artifacts.KindObject, artifacts.KindCubin:
		return []string{l.inProgram, "--visit", l.inVisit}, e.Env, nil // an object build's (artifacts.ObjectEnv); none for a cubin
	case artifacts.KindProcess:
		env := e.Env
		if l.inCache != "" {
			env = maps.Clone(e.Env)
			if env == nil {
				env = map[string]string{}
			}
			env["TILEPIPE_CACHE"] = l.inCache
		}
		return append(append([]string{e.Process.Interpreter, l.inProgram}, e.Process.Args...), "--visit", l.inVisit), env, nil
	}
	return nil, nil, fmt.Errorf("prepared entry %s/%s: kind %q: replay times object, process and cubin entries", e.Case, e.Route, e.Kind)
}

// runTimer starts the visit's timer, drives it (drive) and ends it,
// recording how it ran (exit, CPU, wall, other load, stdout and stderr);
// it returns the samples, the calls per batch sample and the first
// failure's reason ("" when the visit passed so far).
func (r *replayer) runTimer(ctx context.Context, vr *artifacts.VisitResult, e *artifacts.Prepared, l *layout, bufs *buffers, g *gpuSide) ([]visit.Sample, int64, string, error) {
	argv, extra, err := timerArgv(e, l)
	if err != nil {
		return nil, 0, "", err
	}
	dir := l.dir
	if r.sandbox != nil {
		dir = visit.InsideOut
	}
	spec := visit.Spec{Argv: argv, Env: visitEnv(r.cfg.Threads, vr.MallocPerturb, extra), Dir: dir, Sandbox: r.sandbox, Mounts: l.mounts,
		Timeout: time.Duration(r.cfg.TimeoutS * float64(time.Second)), Threads: r.cfg.Threads, Limiter: r.limiter, Files: bufs.files(), Cores: r.visitCores}
	var st *stager
	if g != nil {
		spec.Telemetry, st = g.tel, g.st
	}
	helpers := r.helperPids()
	before, lerr := load.Read(load.StatPath, helpers...)
	sess, err := visit.Start(ctx, spec)
	if err != nil {
		return nil, 0, "", err
	}
	timer := filepath.Join(r.s.Dir(), workDir, timerFile)
	if b, err := json.Marshal(sess.Leftover()); err == nil {
		if err := artifacts.WriteFileAtomic(timer, b); err != nil {
			sess.Close(err, false)
			return nil, 0, "", err
		}
	}
	vr.Argv, vr.Cores = sess.Argv, sess.Cores
	smps, calls, final, derr := r.drive(sess, vr, e, bufs, st)
	reason, out, cerr := sess.Close(derr, final)
	os.Remove(timer)
	vr.End = time.Now().UTC()
	vr.Exit, vr.CPUNs, vr.WallNs, vr.Throttled = out.Exit, out.CPU.Nanoseconds(), out.Wall.Nanoseconds(), out.Throttled
	if after, err := load.Read(load.StatPath, helpers...); err == nil && lerr == nil {
		other, steal := load.Other(before, after, vr.CPUNs)
		vr.Load = &artifacts.VisitLoad{OtherNs: other, StealNs: steal, Loaded: load.Loaded(other, steal, vr.WallNs)}
	}
	for _, o := range []struct {
		b  []byte
		to *artifacts.Digest
	}{{out.Stdout, &vr.Stdout}, {out.Stderr, &vr.Stderr}} {
		d, err := r.s.PutBytes(o.b, artifacts.MediaText)
		if err != nil {
			return nil, 0, "", err
		}
		*o.to = d.Digest
	}
	if ctx.Err() != nil {
		return nil, 0, "", ctx.Err()
	}
	if cerr != nil {
		return nil, 0, "", cerr
	}
	return smps, calls, reason, nil
}

// finishVisit is what a visit that ran through keeps or fails on: warm
// set 0's outputs against the case's first passed visit (memory a kernel
// reads without writing shows up there: the allocator fill differs per
// visit), every warm set's validated outputs and every checked novel
// call's (for the audit), and its sample table.
func (r *replayer) finishVisit(vr *artifacts.VisitResult, in *roundInputs, bufs *buffers, smps []visit.Sample) (*artifacts.VisitResult, error) {
	v, k := vr.Visit, vr.Pair()
	h := sha256.New()
	for i, p := range bufs.params {
		h.Write(bufs.validated[i][:p.Bytes()])
	}
	vr.Set0 = hex.EncodeToString(h.Sum(nil))
	if first := r.set0[k]; first == nil {
		defer func() {
			if vr.Status == artifacts.StatusPassed {
				r.set0[k] = vr
			}
		}()
	} else if first.Set0 != vr.Set0 {
		vr.Status = artifacts.StatusFailed
		vr.Reason = fmt.Sprintf("nondeterministic: warm set 0's outputs differ from visit %d's (the same inputs; allocator fill %d here, %d there)", first.Index, vr.MallocPerturb, first.MallocPerturb)
		return vr, nil
	}
	c := r.cases[v.Case]
	vr.Novel = bufs.novel
	for i, p := range bufs.params {
		put := func(pool string, n int, b []byte) (artifacts.TensorRef, error) {
			shape := append([]int{n}, p.Shape...)
			m := tensor.Meta{Name: p.Name, Role: oracle.RoleOutput, Dtype: p.Dtype, Shape: shape, Case: v.Case, Generator: c.Generator, Seed: in.seed}
			d, err := artifacts.PutTensor(r.s, m, b)
			if err != nil {
				return artifacts.TensorRef{}, err
			}
			r.s.Name(fmt.Sprintf("visits/%d/%s/%s.arrow", v.Index, pool, p.Name), d)
			return artifacts.TensorRef{Name: p.Name, Role: oracle.RoleOutput, Dtype: p.Dtype, Shape: shape, Digest: d.Digest, Size: d.Size}, nil
		}
		w, err := put(sets.Warm, len(in.warm), bufs.validated[i])
		if err != nil {
			return nil, err
		}
		vr.Outputs = append(vr.Outputs, w)
		f, err := put(sets.Novel, len(bufs.novel.Checked), bufs.checked[i])
		if err != nil {
			return nil, err
		}
		vr.Novel.Outputs = append(vr.Novel.Outputs, f)
	}
	var rows []samples.Row
	for _, s := range smps {
		rows = append(rows, samples.Row{Visit: int32(v.Index), Round: int32(v.Round), Position: int32(v.Position), Case: v.Case, Route: v.Route,
			Kind: s.Kind, Index: int32(s.Index), Calls: s.Calls, TotalNs: s.SpanNs, TimerNs: s.TimerNs, Clock: s.Clock,
			Telemetry: s.Tel.Source, Before: s.Tel.Before, After: s.Tel.After, Flags: s.Tel.Flags()})
	}
	sd, err := artifacts.PutSamples(r.s, rows)
	if err != nil {
		return nil, err
	}
	r.cfg.Progress.Printf("replay: visit %d %s %s: %s", v.Index, v.Case, v.Route, medians(rows))
	r.s.Name(fmt.Sprintf("visits/%d/samples.arrow", v.Index), sd)
	vr.Samples = sd.Digest
	vr.Status = artifacts.StatusPassed
	return vr, nil
}

// drive takes the validated report, checks the validation outputs, takes
// the warm samples and the fresh sample, then the final report, and checks
// what the timed calls left; final says whether the final report arrived.
func (r *replayer) drive(sess *visit.Session, vr *artifacts.VisitResult, e *artifacts.Prepared, bufs *buffers, st *stager) ([]visit.Sample, int64, bool, error) {
	rep, err := sess.Validated()
	if err != nil {
		return nil, 0, false, err
	}
	vr.Checks, vr.OutputPolicy, vr.ColdNs = rep.Checks, rep.OutputPolicy, rep.ColdNs
	r.phases.mark("start")
	switch {
	case rep.Status != "ok":
		return nil, 0, false, &visit.Failure{Reason: rep.Reason}
	case rep.Threads != r.cfg.Threads:
		return nil, 0, false, &visit.Failure{Reason: fmt.Sprintf("timer report threads: ran with %d, want %d", rep.Threads, r.cfg.Threads)}
	case e.Process != nil && rep.OutputPolicy != e.Process.OutputPolicy:
		return nil, 0, false, &visit.Failure{Reason: fmt.Sprintf("timer report output_policy: %q, capture recorded %q", rep.OutputPolicy, e.Process.OutputPolicy)}
	}
	if err := bufs.afterValidation(vr); err != nil {
		return nil, 0, false, err
	}
	device := r.cases[vr.Case].Case.DeviceOf()
	clock := record.Clock(device, samples.KindBatch, sets.CurrentRule)
	smps, calls, err := sess.Drive(visit.Plan{
		Warmup: time.Duration(r.cfg.WarmupMs * float64(time.Millisecond)), Sample: time.Duration(r.cfg.SampleMs * float64(time.Millisecond)),
		Samples: r.cfg.Samples, Singles: r.cfg.Singles, MaxCalls: record.MaxCalls, Clock: clock, Pin: r.cfg.Pin == artifacts.PinThreads})
	if err != nil {
		return nil, 0, false, err
	}
	r.phases.mark("warm")
	novel, err := bufs.runNovel(sess, r.cfg.Samples, calls, record.Clock(device, samples.KindNovel, sets.CurrentRule), st)
	if err != nil {
		return nil, calls, false, err
	}
	smps = append(smps, novel...)
	r.phases.mark("novel")
	if batch := r.graphBatch(vr.Case, e); batch > 0 {
		graph, g, err := sess.DriveGraph(int64(batch), r.cfg.Samples,
			time.Duration(r.cfg.SampleMs*float64(time.Millisecond)), time.Duration(r.cfg.WarmupMs*float64(time.Millisecond)))
		vr.Graph = g
		if err != nil {
			return nil, calls, false, err
		}
		smps = append(smps, graph...)
		r.phases.mark("graph")
	}
	if vr.Pins, err = sess.Pins(); err != nil {
		return nil, calls, false, err
	}
	fin, err := sess.End()
	if err != nil {
		return nil, calls, false, err
	}
	vr.Checks = fin.Checks
	if fin.Status != "ok" {
		return nil, calls, true, &visit.Failure{Reason: fin.Reason}
	}
	// The claim's calls first: a checked novel call that is wrong says
	// more than a warm output that changed.
	if err := bufs.judgeNovel(vr); err != nil {
		return nil, calls, true, err
	}
	if err := bufs.afterTiming(vr); err != nil {
		return nil, calls, true, err
	}
	r.phases.mark("judge")
	return smps, calls, true, nil
}

// roundInputs are one case's buffer sets in one round and their sealed
// memory files, shared by every visit of the case in the round.
type roundInputs struct {
	round     int
	id        string
	seed      uint64 // the round's seed
	warm      []*sets.Set
	warmFiles []*visit.MemFile // per input param
	c         oracle.Case
	seeds     sets.Seeds
	novel     map[int64]*sets.Set // the case's novel sets, generated as visits need them
}

// novelSets is novel sets from to from+n-1 of the case in the round, those
// not made yet generated on every core (the visit is frozen meanwhile).
func (ri *roundInputs) novelSets(from, n int64) ([]*sets.Set, error) {
	out := make([]*sets.Set, n)
	var g errgroup.Group
	g.SetLimit(runtime.NumCPU())
	for j := range n {
		if out[j] = ri.novel[from+j]; out[j] != nil {
			continue
		}
		seed, err := ri.seeds.Seed(ri.c.ID, sets.Novel, ri.round, int(from+j))
		if err != nil {
			return nil, err
		}
		g.Go(func() error {
			s, err := sets.NewSet(ri.c, seed)
			if err != nil {
				return fmt.Errorf("case %s novel set %d: %w", ri.c.ID, from+j, err)
			}
			out[j] = s
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for j, s := range out {
		ri.novel[from+int64(j)] = s
	}
	return out, nil
}

// novelSet is novel set g of the case in the round (the same for every
// route's visit, so routes are compared on the same inputs).
func (ri *roundInputs) novelSet(g int64) (*sets.Set, error) {
	if s := ri.novel[g]; s != nil {
		return s, nil
	}
	seed, err := ri.seeds.Seed(ri.c.ID, sets.Novel, ri.round, int(g))
	if err != nil {
		return nil, err
	}
	s, err := sets.NewSet(ri.c, seed)
	if err != nil {
		return nil, fmt.Errorf("case %s novel set %d: %w", ri.c.ID, g, err)
	}
	ri.novel[g] = s
	return s, nil
}

func (ri *roundInputs) close() {
	for _, m := range ri.warmFiles {
		m.Close()
	}
}

// inputCache holds the inputs of the (round, case) being visited: the plan
// visits one case's routes back to back.
type inputCache struct {
	seeds sets.Seeds
	warm  int
	cur   *roundInputs
}

func (ic *inputCache) get(round int, c *artifacts.CapturedCase) (*roundInputs, error) {
	if ic.cur != nil && ic.cur.round == round && ic.cur.id == c.Case.ID {
		return ic.cur, nil
	}
	ic.release()
	ri := &roundInputs{round: round, id: c.Case.ID, seed: ic.seeds.Rounds[round], c: c.Case, seeds: ic.seeds, novel: map[int64]*sets.Set{}}
	var err error
	if ri.warm, err = ic.seeds.Pool(c.Case, sets.Warm, round, ic.warm); err != nil {
		return nil, err
	}
	k := 0
	for _, p := range c.Signature {
		if p.Role != oracle.RoleInput {
			continue
		}
		var raw [][]byte
		for _, s := range ri.warm {
			raw = append(raw, oracle.Encode(s.Inputs[k]))
		}
		m, err := visit.NewInput(p.Name, visit.NewLayout(visit.PoolWarm, len(ri.warm), p.Bytes()), raw)
		if err != nil {
			ri.close()
			return nil, err
		}
		ri.warmFiles = append(ri.warmFiles, m)
		k++
	}
	ic.cur = ri
	return ri, nil
}

func (ic *inputCache) release() {
	if ic.cur != nil {
		ic.cur.close()
		ic.cur = nil
	}
}

// medians is a visit's novel, batch (and graph) samples' median time per call,
// for the progress line a person watches.
func medians(rows []samples.Row) string {
	per := map[string][]float64{}
	for _, r := range rows {
		if r.Kind == samples.KindBatch || r.Kind == samples.KindGraph || r.Kind == samples.KindNovel {
			per[r.Kind] = append(per[r.Kind], r.PerOpNs())
		}
	}
	s := fmt.Sprintf("median %s per call over %d batch samples", report.Duration(stats.Median(per[samples.KindBatch])), len(per[samples.KindBatch]))
	if n := per[samples.KindNovel]; len(n) > 0 {
		s = fmt.Sprintf("median %s per call over %d novel samples (warm %s)", report.Duration(stats.Median(n)), len(n), report.Duration(stats.Median(per[samples.KindBatch])))
	}
	if g := per[samples.KindGraph]; len(g) > 0 {
		s += fmt.Sprintf(", %s in CUDA graphs", report.Duration(stats.Median(g)))
	}
	return s
}
