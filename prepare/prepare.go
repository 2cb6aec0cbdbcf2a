package prepare

import (
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/sign"
	"github.com/tilepipe/tilepipe/artifacts/tensor"
	"github.com/tilepipe/tilepipe/internal/launch"
	"github.com/tilepipe/tilepipe/internal/progress"
	"github.com/tilepipe/tilepipe/internal/visit"
	"github.com/tilepipe/tilepipe/oracle"
	"github.com/tilepipe/tilepipe/prepare/harness"
	"golang.org/x/sync/errgroup"
)

// Config says what to prepare. See [DefaultConfig].
type Config struct {
	Capture string   // committed capture stage
	Output  string   // new stage directory
	CC      string   // C compiler for the harness and the link
	CFlags  []string // harness compile flags
	// BuildTimeout bounds every command prepare runs: the harness compile,
	// each link and each closure listing (--build-timeout-s).
	BuildTimeout time.Duration
	Jobs         int    // entries prepared at once
	NoSandbox    bool   // list closures without a sandbox (--no-sandbox)
	Bwrap        string // bubblewrap program; "" finds bwrap on PATH
	// Key, when set, signs the receipt (a DSSE envelope, artifacts/sign).
	Key      *sign.Key
	Progress *progress.Reporter
}

// DefaultConfig compiles the harness with cc -O2 -std=c11, one entry per
// CPU at once, each command within capture's default build timeout.
var DefaultConfig = Config{CC: "cc", CFlags: []string{"-O2", "-std=c11"}, BuildTimeout: 10 * time.Minute, Jobs: min(runtime.NumCPU(), MaxJobs)}

// Limits of a prepare (docs/limits.md gives the reason for each bound).
const (
	// MaxJobs bounds the entries prepared at once, as capture bounds its
	// builds.
	MaxJobs = 64
	// MinBuildTimeout and MaxBuildTimeout bound the timeout of every command
	// (--build-timeout-s), as in capture.
	MinBuildTimeout, MaxBuildTimeout = time.Second, 24 * time.Hour
)

// Validate checks every number of c against its range (docs/limits.md),
// before anything is read or written; the error names the flag, the range
// and the value given.
func (c Config) Validate() error {
	switch {
	case c.BuildTimeout < MinBuildTimeout || c.BuildTimeout > MaxBuildTimeout:
		return fmt.Errorf("--build-timeout-s: want %g to %g, got %g", MinBuildTimeout.Seconds(), MaxBuildTimeout.Seconds(), c.BuildTimeout.Seconds())
	case c.Jobs < 1 || c.Jobs > MaxJobs:
		return fmt.Errorf("jobs: want 1 to %d, got %d", MaxJobs, c.Jobs)
	}
	return nil
}

// Result is what prepare made.
type Result struct {
	Manifest artifacts.Digest
	Doc      artifacts.PreparedDoc
	Counts   map[string]int
}

type preparer struct {
	cfg     Config
	cap     *artifacts.Stage
	s       *artifacts.Store
	tmp     string
	rec     *artifacts.Receipt
	sandbox *visit.Sandbox     // nil: --no-sandbox
	gpu     visit.CaseDevices  // the GPU's nodes, shown to a cuda case's closure listing
	harness string             // path of harness.o
	cuda    *artifacts.FileRef // the CUDA timer in this stage; nil when no entry runs on a GPU
	// cudaHarness is the CUDA timer's object (path), which object builds
	// for a GPU case link; cudaSyms its names; cudaLib where the CUDA
	// libraries an object build may link (-lcublas) are.
	cudaHarness string
	cudaSyms    *timerSymbols
	cudaLib     string
	timer       *timerSymbols // names route objects may not define
	mu          sync.Mutex    // guards rec.Commands and listings
	// listings are the closure listings of process builds that name
	// their closure arguments (artifacts.Process.ClosureArgs), by what
	// the listing depends on: each runs once, its entries share it.
	listings map[string]*listing
	// ptxas is the ptxas every cubin entry's PTX is built again with.
	ptxasOnce sync.Once
	ptxas     *ptxasTool
}

// listing is one shared closure listing: its files, or why it failed.
type listing struct {
	once    sync.Once
	closure []artifacts.ClosureFile
	why     string
	err     error
}

// Run verifies every blob of the capture, then links each object build into
// a timing harness and pins each process build's closure.
func Run(ctx context.Context, cfg Config) (_ *Result, err error) {
	start := time.Now().UTC()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var deps artifacts.Deps
	var cdoc artifacts.CaptureDoc
	cap, err := artifacts.ReadStage(cfg.Capture, &cdoc, deps.Verified)
	if err != nil {
		return nil, err
	}
	var sb *visit.Sandbox
	if !cfg.NoSandbox {
		if sb, err = visit.Probe(ctx, cfg.Bwrap); err != nil {
			return nil, fmt.Errorf("prepare: no sandbox for closure listings can be made on this machine: %v; --no-sandbox lists them without one", err)
		}
	}
	s, err := artifacts.Begin(cfg.Output, "prepare", cfg.Progress.Printf)
	if err != nil {
		return nil, err
	}
	// Failed or interrupted before the commit: nothing is left behind.
	defer s.Abort(&err)
	tmp, err := os.MkdirTemp("", "tilepipe-prepare-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	rec := artifacts.NewReceipt("prepare", start, map[string]any{"capture": cfg.Capture, "cc": cfg.CC, "cflags": cfg.CFlags, "sandbox": sb.Record()}, cap, &deps)
	p := &preparer{cfg: cfg, cap: cap, s: s, tmp: tmp, sandbox: sb, rec: &rec}
	doc := artifacts.PreparedDoc{Schema: artifacts.DocSchema, Capture: cap.Descriptor.Digest, Threads: cdoc.Threads, CC: append([]string{cfg.CC}, cfg.CFlags...)}
	if err := p.compileHarness(ctx, &doc); err != nil {
		return nil, err
	}
	for _, c := range cdoc.Cases {
		for _, b := range c.Builds {
			if (b.Kind == artifacts.KindCubin || c.Case.DeviceOf() == oracle.DeviceCUDA) && b.Status == artifacts.StatusBuilt && p.cuda == nil {
				if err := p.compileCUDATimer(ctx, &doc); err != nil {
					return nil, err
				}
			}
		}
	}
	entries, builds, cases, err := p.entries(cdoc)
	if err != nil {
		return nil, err
	}
	if err := p.prepareAll(ctx, entries, builds, cases); err != nil {
		return nil, err
	}
	res := &Result{Counts: map[string]int{}}
	for _, e := range entries {
		res.Counts[e.Status]++
		doc.Entries = append(doc.Entries, *e)
	}
	cfg.Progress.Done()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.rec.ResolvedDependencies = deps.List()
	subject := cap.Descriptor
	subject.Annotations = nil
	md, err := s.Finish(artifacts.PreparedType, doc, *p.rec, &subject, p.cfg.Key)
	if err != nil {
		return nil, err
	}
	res.Manifest, res.Doc = md.Digest, doc
	return res, nil
}

// entries is one entry per (case, build) of the capture, in its order,
// with the build and case beside it: a built one gets the case's raw
// inputs (stored once a case) and its outputs, a build whose below-best
// note does not parse fails here.
func (p *preparer) entries(cdoc artifacts.CaptureDoc) ([]*artifacts.Prepared, []artifacts.Build, []*artifacts.CapturedCase, error) {
	var entries []*artifacts.Prepared
	var builds []artifacts.Build
	var cases []*artifacts.CapturedCase
	for i := range cdoc.Cases {
		c := &cdoc.Cases[i]
		var inputs []artifacts.TensorRef
		for _, b := range c.Builds {
			e := &artifacts.Prepared{Case: c.Case.ID, Route: b.Route, Kind: b.Kind, Status: b.Status, Reason: b.Reason}
			for _, n := range []struct {
				read func() (string, error)
				to   *string
			}{{b.BelowBest, &e.BelowBest}, {b.OwnGraphs, &e.OwnGraphs}} {
				if v, err := n.read(); err != nil {
					if b.Status == artifacts.StatusBuilt {
						e.Status, e.Reason = artifacts.StatusFailed, "capture build "+err.Error()
					}
				} else {
					*n.to = v
				}
			}
			if cold, err := b.Cold(); err != nil {
				if b.Status == artifacts.StatusBuilt {
					e.Status, e.Reason = artifacts.StatusFailed, "capture build "+err.Error()
				}
			} else {
				e.Cold = cold
			}
			if e.Status == artifacts.StatusBuilt {
				if inputs == nil {
					var err error
					if inputs, err = p.rawInputs(*c); err != nil {
						return nil, nil, nil, err
					}
				}
				e.Inputs = inputs
				for _, sp := range c.Signature {
					if sp.Role == oracle.RoleOutput {
						e.Outputs = append(e.Outputs, sp)
					}
				}
			}
			entries, builds, cases = append(entries, e), append(builds, b), append(cases, c)
		}
	}
	return entries, builds, cases, nil
}

// prepareAll prepares every built entry by its kind. Entries are
// independent (each has its own work directory) and run cfg.Jobs at a
// time; each keeps its place in the document.
func (p *preparer) prepareAll(ctx context.Context, entries []*artifacts.Prepared, builds []artifacts.Build, cases []*artifacts.CapturedCase) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.cfg.Jobs)
	var done atomic.Int64
	for i, e := range entries {
		if e.Status != artifacts.StatusBuilt {
			continue
		}
		g.Go(func() error {
			var why string
			var err error
			switch b := builds[i]; b.Kind {
			case artifacts.KindObject:
				why, err = p.object(gctx, *cases[i], b, e)
			case artifacts.KindProcess:
				why, err = p.process(gctx, *cases[i], b, e)
			case artifacts.KindCubin:
				why, err = p.cubin(gctx, *cases[i], b, e)
			default:
				why = fmt.Sprintf("kind %q cannot be prepared", b.Kind)
			}
			if err != nil {
				return err
			}
			e.Status, e.Reason = artifacts.StatusPrepared, ""
			if why != "" {
				e.Status, e.Reason = artifacts.StatusFailed, why
				e.Program, e.Closure, e.Kernel = nil, nil, nil
				p.cfg.Progress.Printf("prepare: %s %s failed: %s", e.Case, e.Route, why)
			}
			p.cfg.Progress.Step("prepare", int(done.Add(1)), len(entries), e.Case+" "+e.Route+": "+e.Status)
			return nil
		})
	}
	return g.Wait()
}

func (p *preparer) run(ctx context.Context, argv []string, dir string, env map[string]string) (artifacts.Command, []byte, string, error) {
	cmd, out, reason, err := p.s.Run(ctx, argv, dir, env, p.cfg.BuildTimeout)
	if err == nil {
		p.mu.Lock()
		p.rec.Commands = append(p.rec.Commands, cmd)
		p.mu.Unlock()
	}
	return cmd, out, reason, err
}

func (p *preparer) compileHarness(ctx context.Context, doc *artifacts.PreparedDoc) error {
	src := filepath.Join(p.tmp, "harness.c")
	if err := os.WriteFile(src, harness.Source, 0o444); err != nil {
		return err
	}
	obj := filepath.Join(p.tmp, "harness.o")
	argv := append(append([]string{p.cfg.CC}, p.cfg.CFlags...), "-c", src, "-o", obj)
	_, _, reason, err := p.run(ctx, argv, p.tmp, nil)
	if err != nil {
		return err
	}
	if reason != "" {
		return fmt.Errorf("compile harness (%s): %s", strings.Join(argv, " "), reason)
	}
	if p.timer, err = loadTimerSymbols(ctx, p.cfg.CC, obj); err != nil {
		return fmt.Errorf("link policy: %w", err)
	}
	if out, err := runOutput(ctx, p.cfg.CC, "--version"); err == nil {
		doc.CCVersion = strings.SplitN(out, "\n", 2)[0]
	}
	sd, err := p.s.PutFile(src, artifacts.MediaText)
	if err != nil {
		return err
	}
	p.s.Name("harness/harness.c", sd)
	od, err := p.s.PutFile(obj, artifacts.MediaOctet)
	if err != nil {
		return err
	}
	p.s.Name("harness/harness.o", od)
	doc.HarnessSource = artifacts.FileRef{Path: "harness.c", Role: artifacts.RoleSource, Digest: sd.Digest, Size: sd.Size}
	doc.HarnessObject = artifacts.FileRef{Path: "harness.o", Role: artifacts.RoleObject, Digest: od.Digest, Size: od.Size}
	p.harness = obj
	return nil
}

// compileCUDATimer builds the CUDA timer once: harness.c with its CUDA
// back end (cuda/backend.c), which loads the driver at run time, so it
// builds on a machine without CUDA; it runs only where the driver is
// (its closure listing loads it).
func (p *preparer) compileCUDATimer(ctx context.Context, doc *artifacts.PreparedDoc) error {
	dir := filepath.Join(p.tmp, "cuda-timer")
	src, err := harness.WriteCUDA(dir, 0o444)
	if err != nil {
		return err
	}
	// One object: linked alone it is the cubin timer; object builds for a
	// GPU case link it with their objects.
	obj, exe := filepath.Join(dir, "cuda-harness.o"), filepath.Join(dir, "cuda-timer")
	for _, argv := range [][]string{
		append(append([]string{p.cfg.CC}, p.cfg.CFlags...), "-DTILEPIPE_CUDA", "-c", src, "-o", obj),
		{p.cfg.CC, "-o", exe, obj, "-ldl"},
	} {
		_, _, reason, err := p.run(ctx, argv, dir, nil)
		if err != nil {
			return err
		}
		if reason != "" {
			return fmt.Errorf("build the CUDA timer (%s): %s", strings.Join(argv, " "), reason)
		}
	}
	if p.cudaSyms, err = loadTimerSymbols(ctx, p.cfg.CC, obj); err != nil {
		return fmt.Errorf("link policy: %w", err)
	}
	p.cudaHarness = obj
	od, err := p.s.PutFile(obj, artifacts.MediaOctet)
	if err != nil {
		return err
	}
	p.s.Name("harness/cuda-harness.o", od)
	doc.CUDAObject = &artifacts.FileRef{Path: "cuda-harness.o", Role: artifacts.RoleObject, Digest: od.Digest, Size: od.Size}
	p.cudaLib = cudaLibDir()
	doc.CUDALib = p.cudaLib
	bd, err := p.s.PutFile(filepath.Join(dir, "cuda", "backend.c"), artifacts.MediaText)
	if err != nil {
		return err
	}
	p.s.Name("harness/cuda/backend.c", bd)
	xd, err := p.s.PutFile(exe, artifacts.MediaExec)
	if err != nil {
		return err
	}
	p.s.Name("harness/cuda-timer", xd)
	doc.CUDASource = &artifacts.FileRef{Path: "cuda/backend.c", Role: artifacts.RoleSource, Digest: bd.Digest, Size: bd.Size}
	doc.CUDATimer = &artifacts.FileRef{Path: "cuda-timer", Role: artifacts.RoleExecutable, Digest: xd.Digest, Size: xd.Size}
	p.cuda = doc.CUDATimer
	return nil
}

// cudaLibs are the CUDA libraries an object build may link.
var cudaLibs = []string{"-lcublas", "-lcublasLt", "-lcudart"}

const cudaLibHint = "$TILEPIPE_CUDA_LIB, $CUDA_HOME/lib64, /usr/local/cuda/lib64"

// cudaLibDir is the directory holding libcublas.so: $TILEPIPE_CUDA_LIB,
// else $CUDA_HOME/lib64, else /usr/local/cuda/lib64; "" if none has it.
func cudaLibDir() string {
	var dirs []string
	if d := os.Getenv("TILEPIPE_CUDA_LIB"); d != "" {
		dirs = append(dirs, d)
	}
	if d := os.Getenv("CUDA_HOME"); d != "" {
		dirs = append(dirs, filepath.Join(d, "lib64"))
	}
	for _, d := range append(dirs, "/usr/local/cuda/lib64") {
		if _, err := os.Stat(filepath.Join(d, "libcublas.so")); err == nil {
			if r, err := filepath.EvalSymlinks(d); err == nil {
				return r
			}
		}
	}
	return ""
}

// cubin checks a cubin build's launch manifest again (against the case and
// the PTX stored beside it), writes its launch in the timer's line form
// and pins the CUDA timer's closure, the driver's files included. No code
// of the route runs here or at replay.
func (p *preparer) cubin(ctx context.Context, c artifacts.CapturedCase, b artifacts.Build, e *artifacts.Prepared) (string, error) {
	files := map[string]artifacts.FileRef{}
	for _, f := range b.Files {
		switch f.Role {
		case "cubin", "ptx", "manifest":
			if _, dup := files[f.Role]; dup {
				return fmt.Sprintf("files: a second file with role %s", f.Role), nil
			}
			files[f.Role] = f
		}
	}
	read := func(role string, limit int64) ([]byte, error) {
		f, ok := files[role]
		if !ok {
			return nil, fmt.Errorf("files: no file with role %s", role)
		}
		if !p.cap.Has(f.Digest) {
			return nil, fmt.Errorf("capture blob %s (%s) is not a layer of the capture manifest", artifacts.Short(f.Digest), f.Path)
		}
		return p.cap.Store.ReadVerified(f.Digest, f.Path, limit)
	}
	mb, err := read("manifest", launch.MaxManifestBytes)
	if err != nil {
		return err.Error(), nil
	}
	m, err := launch.Parse(mb)
	if err == nil {
		err = m.Check(c.Signature)
	}
	if err != nil {
		return fmt.Sprintf("launch manifest %s: %v", files["manifest"].Path, err), nil
	}
	ptx, err := read("ptx", 256<<20)
	if err != nil {
		return err.Error(), nil
	}
	if err := m.MatchPTX(ptx); err != nil {
		return fmt.Sprintf("launch manifest %s against %s: %v", files["manifest"].Path, files["ptx"].Path, err), nil
	}
	cubin, err := read("cubin", 1<<30)
	if err != nil {
		return err.Error(), nil
	}
	if why, err := p.rebuild(ctx, c, b, m, files, ptx, cubin, e); why != "" || err != nil {
		return why, err
	}
	ld, err := p.s.PutBytes([]byte(m.Lines(c.Signature)), artifacts.MediaText)
	if err != nil {
		return "", err
	}
	p.s.Name(fmt.Sprintf("cases/%s/%s/launch.txt", c.Case.ID, b.Route), ld)
	cf := files["cubin"]
	e.Kernel = []artifacts.FileRef{{Path: cf.Path, Role: artifacts.RoleCubin, Digest: cf.Digest, Size: cf.Size}, {Path: "launch.txt", Role: artifacts.RoleLaunch, Digest: ld.Digest, Size: ld.Size}}
	prog := *p.cuda
	e.Program = &prog
	// The timer's closure listing runs in the sandbox, which shows the
	// entry's own directory alone: a copy of the timer goes there.
	dir := filepath.Join(p.tmp, c.Case.ID+"."+b.Route)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	exe := filepath.Join(dir, prog.Path)
	if err := p.s.CopyOut(prog.Digest, exe, 0o555); err != nil {
		return "", err
	}
	return p.closure(ctx, []string{exe, "--closure"}, dir, nil, c.Case.DeviceOf() == oracle.DeviceCUDA, e)
}

// ptxasTool is the ptxas prepare runs (launch.FindPtxas), found once.
type ptxasTool struct {
	path, version string
	digest        artifacts.Digest
	err           error
}

func (p *preparer) findPtxas(ctx context.Context) *ptxasTool {
	p.ptxasOnce.Do(func() {
		t := &ptxasTool{}
		p.ptxas = t
		if t.path, t.err = launch.FindPtxas(); t.err != nil {
			return
		}
		if t.digest, _, t.err = artifacts.HashFile(t.path); t.err != nil {
			return
		}
		out, err := runOutput(ctx, t.path, "--version")
		if err != nil {
			t.err = fmt.Errorf("%s --version: %v", t.path, err)
			return
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "release") {
				t.version = strings.TrimSpace(l)
			}
		}
		if t.version == "" {
			t.version = strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
		}
	})
	return p.ptxas
}

// rebuild is the cubin chain (docs/gpu.md, "The cubin chain"): ptxas,
// found by tilepipe (launch.FindPtxas), builds the stored PTX again in the
// sandbox with the manifest's flags for the PTX's .target, and the stored
// cubin must hold the same code (launch.SameCode); the rebuilt cubin is
// kept as a layer and the chain recorded in the entry. A cubin that is not
// its PTX's (a route that hands over honest source and PTX beside a cubin
// of its own) is refused before anything runs it.
func (p *preparer) rebuild(ctx context.Context, c artifacts.CapturedCase, b artifacts.Build, m launch.Manifest, files map[string]artifacts.FileRef, ptx, cubin []byte, e *artifacts.Prepared) (string, error) {
	pf, cf := files["ptx"], files["cubin"]
	t := p.findPtxas(ctx)
	if t.err != nil {
		return fmt.Sprintf("cubin chain: %v: prepare builds every cubin again from its PTX", t.err), nil
	}
	target, err := launch.Target(ptx)
	if err != nil {
		return fmt.Sprintf("cubin chain: %s: %v", pf.Path, err), nil
	}
	dir := filepath.Join(p.tmp, c.Case.ID+"."+b.Route+".ptxas")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	src, out := filepath.Join(dir, "kernel.ptx"), filepath.Join(dir, "kernel.cubin")
	if err := os.WriteFile(src, ptx, 0o444); err != nil {
		return "", err
	}
	args := append(slices.Clone(m.Ptxas), "--gpu-name="+target)
	argv := append(append([]string{t.path}, args...), src, "-o", out)
	if p.sandbox != nil {
		argv = p.sandbox.Wrap([]string{p.cap.Store.Dir(), p.s.Dir(), p.tmp}, nil, []visit.Bind{{Src: dir, Dst: dir}}, nil, dir, argv)
	}
	_, _, reason, err := p.run(ctx, argv, dir, nil)
	if err != nil {
		return "", err
	}
	if reason != "" {
		return fmt.Sprintf("cubin chain: ptxas %s on %s: %s", strings.Join(args, " "), pf.Path, reason), nil
	}
	built, err := os.ReadFile(out)
	if err != nil {
		return fmt.Sprintf("cubin chain: ptxas wrote no cubin: %v", err), nil
	}
	if err := launch.SameCode(cubin, built); err != nil {
		return fmt.Sprintf("cubin chain: %s is not what ptxas builds from %s (%s %s): %v", cf.Path, pf.Path, t.path, strings.Join(args, " "), err), nil
	}
	rd, err := p.s.PutBytes(built, artifacts.MediaOctet)
	if err != nil {
		return "", err
	}
	p.s.Name(fmt.Sprintf("cases/%s/%s/rebuilt.cubin", c.Case.ID, b.Route), rd)
	e.Chain = &artifacts.CubinChain{PTX: pf.Digest, Cubin: cf.Digest, Rebuilt: artifacts.FileRef{Path: "rebuilt.cubin", Role: artifacts.RoleCubin, Digest: rd.Digest, Size: rd.Size},
		Ptxas: t.path, PtxasDigest: t.digest, PtxasVersion: t.version, Args: args}
	return "", nil
}

// rawInputs stores each packet input as raw little-endian bytes, which the
// timers read directly.
func (p *preparer) rawInputs(c artifacts.CapturedCase) ([]artifacts.TensorRef, error) {
	var out []artifacts.TensorRef
	for _, in := range c.Packet.Inputs {
		if !p.cap.Has(in.Digest) {
			return nil, fmt.Errorf("capture: case %s input %s: blob %s is not a layer of the capture manifest", c.Case.ID, in.Name, artifacts.Short(in.Digest))
		}
		t, err := tensor.ReadFile(p.cap.Store.Path(in.Digest), nil)
		if err != nil {
			return nil, err
		}
		if t.Meta.Name != in.Name || t.Meta.Role != oracle.RoleInput || t.Meta.Case != c.Case.ID || !slices.Equal(t.Meta.Shape, in.Shape) {
			t.Release()
			return nil, fmt.Errorf("capture: case %s input %s: tensor metadata %+v disagrees with the capture document", c.Case.ID, in.Name, t.Meta)
		}
		d, err := p.s.PutBytes(t.Bytes(), artifacts.MediaOctet)
		t.Release()
		if err != nil {
			return nil, err
		}
		p.s.Name(fmt.Sprintf("cases/%s/input/%s.bin", c.Case.ID, in.Name), d)
		r := in
		r.Digest, r.Size = d.Digest, d.Size
		out = append(out, r)
	}
	return out, nil
}

// materialize copies a verified capture blob to path, hashing the copy.
func (p *preparer) materialize(d artifacts.Digest, path string, mode os.FileMode) error {
	if !p.cap.Has(d) {
		return fmt.Errorf("capture blob %s is not a layer of the capture manifest", artifacts.Short(d))
	}
	return p.cap.Store.CopyOut(d, path, mode)
}

// object checks the build against the link policy (policy.go), then links
// the captured objects, unchanged (a copy with its constructors moved for
// one that has them), with the harness.
func (p *preparer) object(ctx context.Context, c artifacts.CapturedCase, b artifacts.Build, e *artifacts.Prepared) (string, error) {
	dir := filepath.Join(p.tmp, c.Case.ID+"."+b.Route)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	if b.Entry == nil {
		return "entry: an object build without an entry symbol", nil
	}
	harnessObj, syms := p.harness, p.timer
	if c.Case.DeviceOf() == oracle.DeviceCUDA {
		// The objects' entry takes device buffers and a stream: the CUDA
		// timer calls it.
		harnessObj, syms = p.cudaHarness, p.cudaSyms
	}
	argv := []string{p.cfg.CC, "-o", filepath.Join(dir, "harness"), harnessObj}
	if b.Entry.Symbol != harnessEntry {
		// The harness calls tilepipe_entry; the linker points it at the
		// build's symbol (a C identifier, checked by capture), so the
		// objects stay byte for byte as captured.
		argv = append(argv, "-Wl,--defsym="+harnessEntry+"="+b.Entry.Symbol)
	}
	var objs []policyObject
	for _, f := range b.Files {
		if f.Role != artifacts.RoleObject {
			continue
		}
		path := filepath.Join(dir, fmt.Sprintf("%02d-%s", len(objs), filepath.Base(f.Path)))
		if err := p.materialize(f.Digest, path, 0o444); err != nil {
			return "", err
		}
		argv = append(argv, path)
		objs = append(objs, policyObject{Path: f.Path, File: path})
		e.Objects = append(e.Objects, artifacts.FileRef{Path: f.Path, Role: artifacts.RoleObject, Digest: f.Digest, Size: f.Size})
	}
	if why, err := checkLinkPolicy(objs, b.Link, syms); why != "" || err != nil {
		return why, err
	}
	deferred, why, err := p.deferAll(ctx, objs, argv, dir)
	if why != "" || err != nil {
		return why, err
	}
	if err := artifacts.CheckObjectEnv(b.Env); err != nil {
		return "capture build " + err.Error(), nil
	}
	e.Env = b.Env
	if slices.ContainsFunc(b.Link, func(f string) bool { return slices.Contains(cudaLibs, f) }) {
		if p.cudaLib == "" {
			return "link: " + strings.Join(b.Link, " ") + " names a CUDA library, and no CUDA library directory was found (" + cudaLibHint + ")", nil
		}
		// The CUDA libraries' directory is prepare's choice, never the
		// route's (docs/protocol.md).
		argv = append(argv, "-L"+p.cudaLib, "-Wl,-rpath,"+p.cudaLib)
	}
	argv = append(argv, b.Link...)
	argv = append(argv, "-lpthread", "-ldl", "-lm")
	_, _, reason, err := p.run(ctx, argv, dir, nil)
	if err != nil {
		return "", err
	}
	if reason != "" {
		return "link: " + reason, nil
	}
	if why, err := linkedUnchanged(e.Objects, objs, deferred); why != "" || err != nil {
		return why, err
	}
	exe := filepath.Join(dir, "harness")
	d, err := p.s.PutFile(exe, artifacts.MediaExec)
	if err != nil {
		return "", err
	}
	p.s.Name(fmt.Sprintf("cases/%s/%s/harness", c.Case.ID, b.Route), d)
	e.Program = &artifacts.FileRef{Path: "harness", Role: artifacts.RoleExecutable, Digest: d.Digest, Size: d.Size}
	return p.closure(ctx, []string{exe, "--closure"}, dir, nil, c.Case.DeviceOf() == oracle.DeviceCUDA, e)
}

// process pins the wrapper script, the interpreter and what they map.
func (p *preparer) process(ctx context.Context, c artifacts.CapturedCase, b artifacts.Build, e *artifacts.Prepared) (string, error) {
	pr := b.Process
	if pr == nil {
		return "process: capture recorded no process description", nil
	}
	// The interpreter is run by the name the route gave (a venv's
	// bin/python3 may be a symlink); its digest is of the file it resolves to.
	real, err := filepath.EvalSymlinks(pr.Interpreter)
	var got artifacts.Digest
	if err == nil {
		got, _, err = artifacts.HashFile(real)
	}
	if err != nil {
		return fmt.Sprintf("process: interpreter %s: %v", pr.Interpreter, err), nil
	}
	if got != pr.InterpreterDigest {
		return fmt.Sprintf("process: interpreter %s changed since capture: captured %s, now %s", pr.Interpreter, pr.InterpreterDigest, got), nil
	}
	var script *artifacts.FileRef
	for i := range b.Files {
		if b.Files[i].Path == pr.Script && b.Files[i].Role == "wrapper" {
			script = &b.Files[i]
		}
	}
	if script == nil {
		return fmt.Sprintf("process: script %s is not among the captured files", pr.Script), nil
	}
	dir := filepath.Join(p.tmp, c.Case.ID+"."+b.Route)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, filepath.Base(pr.Script))
	if err := p.materialize(script.Digest, path, 0o444); err != nil {
		return "", err
	}
	e.Program = &artifacts.FileRef{Path: pr.Script, Role: artifacts.RoleWrapper, Digest: script.Digest, Size: script.Size}
	e.Process = pr
	for _, f := range b.Files {
		if f.Role != artifacts.RoleCache {
			continue
		}
		if !p.cap.Has(f.Digest) {
			return fmt.Sprintf("process: cache file %s: blob %s is not a layer of the capture manifest", f.Path, artifacts.Short(f.Digest)), nil
		}
		e.Data = append(e.Data, f)
	}
	e.Env = pr.Env
	cuda := c.Case.DeviceOf() == oracle.DeviceCUDA
	if pr.ClosureArgs == nil {
		argv := append([]string{pr.Interpreter, path}, pr.Args...)
		return p.closure(ctx, append(argv, "--closure"), dir, pr.Env, cuda, e)
	}
	// The route says the listing depends on nothing of the case but its
	// closure arguments: one listing for every entry that shares them,
	// the interpreter, the script's bytes, the environment and the device.
	key, _ := json.Marshal([]any{pr.Interpreter, pr.InterpreterDigest, script.Digest, pr.ClosureArgs, pr.Env, cuda})
	p.mu.Lock()
	if p.listings == nil {
		p.listings = map[string]*listing{}
	}
	l := p.listings[string(key)]
	if l == nil {
		l = &listing{}
		p.listings[string(key)] = l
	}
	p.mu.Unlock()
	l.once.Do(func() {
		var first artifacts.Prepared
		argv := append(append([]string{pr.Interpreter, path}, pr.ClosureArgs...), "--closure")
		l.why, l.err = p.closure(ctx, argv, dir, pr.Env, cuda, &first)
		l.closure = first.Closure
	})
	e.Closure = slices.Clone(l.closure)
	return l.why, l.err
}

// closure runs the timer's --closure and pins every file it maps, except
// the program itself (pinned as Program) and files in the work directory.
// It is route code, so it runs in the sandbox: the file system read-only,
// the capture, this stage and prepare's scratch hidden, its own directory
// visible, and for a cuda case the GPU's device nodes (a timer that
// initialises CUDA maps what a visit on the GPU maps).
func (p *preparer) closure(ctx context.Context, argv []string, dir string, env map[string]string, cuda bool, e *artifacts.Prepared) (string, error) {
	// A private writable directory, named by TMPDIR: the sandbox shows the
	// rest of the system read-only, and a timer whose listing compiles
	// (torch-compile's) needs somewhere to put its scratch caches. Files
	// under it are prepare's temporary files, never listed.
	tmp, err := os.MkdirTemp(p.tmp, "closure-tmp-")
	if err != nil {
		return "", err
	}
	env = maps.Clone(env)
	if env == nil {
		env = map[string]string{}
	}
	env["TMPDIR"] = tmp
	argv = p.sandbox.Wrap([]string{p.cap.Store.Dir(), p.s.Dir(), p.tmp}, []visit.Bind{{Src: dir, Dst: dir}}, []visit.Bind{{Src: tmp, Dst: tmp}}, p.gpu.For(cuda), dir, argv)
	_, out, reason, err := p.run(ctx, argv, dir, env)
	if err != nil {
		return "", err
	}
	if reason != "" {
		return "closure: " + reason, nil
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path := strings.TrimSpace(line)
		if path == "" || strings.HasPrefix(path, p.tmp+"/") {
			continue
		}
		if !filepath.IsAbs(path) {
			return fmt.Sprintf("closure: %q is not an absolute path", path), nil
		}
		d, n, err := artifacts.HashFile(path)
		if err != nil {
			return fmt.Sprintf("closure: %s: %v", path, err), nil
		}
		e.Closure = append(e.Closure, artifacts.ClosureFile{Path: path, Digest: d, Size: n})
	}
	if len(e.Closure) == 0 {
		return "closure: the timer listed no mapped files", nil
	}
	return "", nil
}

// deferAll makes the deferred copy of every object with constructors
// and puts it in the link (argv) in the object's place; the copies by
// object index.
func (p *preparer) deferAll(ctx context.Context, objs []policyObject, argv []string, dir string) (map[int]deferredCopy, string, error) {
	deferred := map[int]deferredCopy{}
	for i, o := range objs {
		if !o.Defer {
			continue
		}
		c, why, err := p.deferConstructors(ctx, o, dir)
		if why != "" || err != nil {
			return nil, why, err
		}
		deferred[i] = c
		argv[slices.Index(argv, o.File)] = c.file
	}
	return deferred, "", nil
}

// linkedUnchanged says whether the linker read exactly the captured
// objects (captured, in objs' files) and the deferred copies made from
// them.
func linkedUnchanged(captured []artifacts.FileRef, objs []policyObject, deferred map[int]deferredCopy) (string, error) {
	for i, o := range captured {
		got, _, err := artifacts.HashFile(objs[i].File)
		if err != nil {
			return "", err
		}
		if got != o.Digest {
			return fmt.Sprintf("link: object %s changed during the link: captured %s, linked %s", objs[i].File, o.Digest, got), nil
		}
		if c, ok := deferred[i]; ok {
			if got, _, err = artifacts.HashFile(c.file); err != nil {
				return "", err
			}
			if got != c.digest {
				return fmt.Sprintf("link: object %s changed during the link: made %s, linked %s", c.file, c.digest, got), nil
			}
		}
	}
	return "", nil
}

// deferredCopy is an object's copy with its constructors deferred.
type deferredCopy struct {
	file   string
	digest artifacts.Digest
}

// deferConstructors writes a copy of o whose constructors section
// (deferSection) is renamed deferredSection, with the objcopy beside cc;
// the timer calls them just before the first call of the entry
// (docs/protocol.md, "Constructors"). The copy's digest is checked after
// the link.
func (p *preparer) deferConstructors(ctx context.Context, o policyObject, dir string) (deferredCopy, string, error) {
	objcopy, err := runOutput(ctx, p.cfg.CC, "-print-prog-name=objcopy")
	if err == nil {
		objcopy, err = exec.LookPath(strings.TrimSpace(objcopy))
	}
	if err != nil {
		return deferredCopy{}, fmt.Sprintf("link_policy: %s: section %s: constructors run at the first call, and no objcopy was found to move them there: %v", o.Path, deferSection, err), nil
	}
	out := strings.TrimSuffix(o.File, ".o") + ".deferred.o"
	_, _, reason, err := p.run(ctx, []string{objcopy, "--rename-section", deferSection + "=" + deferredSection, o.File, out}, dir, nil)
	if err != nil {
		return deferredCopy{}, "", err
	}
	if reason != "" {
		return deferredCopy{}, fmt.Sprintf("link_policy: %s: deferring its constructors: %s", o.Path, reason), nil
	}
	f, err := elf.Open(out)
	if err != nil {
		return deferredCopy{}, fmt.Sprintf("link_policy: %s: deferring its constructors: %v", o.Path, err), nil
	}
	defer f.Close()
	if f.Section(deferSection) != nil || f.Section(deferredSection) == nil {
		return deferredCopy{}, fmt.Sprintf("link_policy: %s: objcopy left section %s in place", o.Path, deferSection), nil
	}
	d, _, err := artifacts.HashFile(out)
	if err != nil {
		return deferredCopy{}, "", err
	}
	return deferredCopy{file: out, digest: d}, "", nil
}
