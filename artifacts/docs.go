package artifacts

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tilepipe/tilepipe/oracle"
)

// Artifact types of the stage manifests, and the titles of their documents.
const (
	CaptureType  = "application/vnd.tilepipe.capture.v1+json"
	PreparedType = "application/vnd.tilepipe.prepared.v1+json"
	ReplayType   = "application/vnd.tilepipe.replay.v1+json"
	// AuditType is the audit stage's: its config the audit statement, its
	// layer audit.md, its subject the replay manifest it audited.
	AuditType = "application/vnd.tilepipe.audit.v1+json"
	DocTitle  = "tilepipe.json"
	DocSchema = 1
)

// StageName is the name a stage of artifactType goes by: its directory in
// a checkpoint, its index.json ref.name and its tag in a registry
// ("capture", "prepared", "replay", "audit"; "" for another type).
func StageName(artifactType string) string {
	switch artifactType {
	case CaptureType:
		return "capture"
	case PreparedType:
		return "prepared"
	case ReplayType:
		return "replay"
	case AuditType:
		return "audit"
	}
	return ""
}

// Row statuses shared by every stage.
const (
	StatusBuilt       = "built"
	StatusPrepared    = "prepared"
	StatusPassed      = "passed"
	StatusFailed      = "failed"
	StatusUnsupported = "unsupported"
	StatusUnavailable = "unavailable"
)

// TensorRef names a tensor blob (an Arrow file, or raw bytes for prepared
// inputs) and what it holds.
type TensorRef struct {
	Name   string `json:"name"`
	Role   string `json:"role"`
	Dtype  string `json:"dtype"`
	Shape  []int  `json:"shape"`
	Digest Digest `json:"digest"`
	Size   int64  `json:"size"`
}

// A build's kind (a route's describe answer gives it, each prepared entry
// keeps it): objects linked into tilepipe's harness, a process tilepipe's
// wrapper drives, or a cubin tilepipe's CUDA timer loads.
const (
	KindObject  = "object"
	KindProcess = "process"
	KindCubin   = "cubin"
)

// A stored file's role (docs/format.md): what it is to the stage that
// stored it. RoleOutput is a validation output, the tensor of the output
// param it names.
const (
	RoleObject     = "object"
	RoleCubin      = "cubin"
	RoleSource     = "source"
	RoleExecutable = "executable"
	RoleWrapper    = "wrapper"
	RoleLaunch     = "launch"
	RoleCache      = "cache"
	RoleOutput     = oracle.RoleOutput
)

// CacheDir is the directory under a process build's workdir that holds
// its cache files (role cache): what a JIT compiled at capture, which
// every visit gets a fresh copy of (docs/protocol.md, "Cache files").
const CacheDir = "cache"

// FileRef is a file a route or stage produced, stored by digest. Param
// names the output param a file of role output holds (docs/protocol.md,
// validation outputs).
type FileRef struct {
	Path   string `json:"path"`
	Role   string `json:"role"`
	Param  string `json:"param,omitempty"`
	Digest Digest `json:"digest"`
	Size   int64  `json:"size"`
}

// Packet is what capture stores per case: inputs, FP64 expected outputs and
// per-element bounds.
type Packet struct {
	Inputs   []TensorRef `json:"inputs"`
	Expected []TensorRef `json:"expected"`
	Bound    []TensorRef `json:"bound"`
}

// Entry is the C entry point of an object route.
type Entry struct {
	Symbol string         `json:"symbol"`
	Params []oracle.Param `json:"params"`
}

// Process is how to run a process route's wrapper.
type Process struct {
	Interpreter       string            `json:"interpreter"`
	InterpreterDigest Digest            `json:"interpreterDigest"`
	Script            string            `json:"script"`
	Args              []string          `json:"args"`
	Env               map[string]string `json:"env"`
	OutputPolicy      string            `json:"outputPolicy"`
	// ClosureArgs, when set, are the arguments the closure listing takes
	// instead of Args (docs/protocol.md, "closure"): the route says its
	// listing depends on nothing of the case but these, so prepare lists
	// once for every entry of the same interpreter, script, ClosureArgs,
	// environment and device.
	ClosureArgs []string `json:"closureArgs,omitempty"`
}

// Route is what capture learned about one route from describe.
type Route struct {
	// Name is what the route goes by in this checkpoint: the name its
	// describe answer gives, or the alias it was given (--routes
	// ALIAS=ROUTE, --route-exec ALIAS=PATH), when Describes holds the
	// describe answer's name.
	Name      string   `json:"name"`
	Describes string   `json:"describes,omitempty"`
	Kind      string   `json:"kind"`
	Version   string   `json:"version"`
	Available bool     `json:"available"`
	Reason    string   `json:"reason"`
	Ops       []string `json:"ops"`
	Exec      string   `json:"exec"`
	Digest    Digest   `json:"digest"`
	Describe  Digest   `json:"describe"`
	External  bool     `json:"external"`
	Validates bool     `json:"validates,omitempty"` // runs its build once and returns the outputs
	AcceptsIR bool     `json:"acceptsIR,omitempty"` // builds from --ir/--abi when given
	// Devices the route builds for; absent: the CPU alone.
	Devices []string `json:"devices,omitempty"`
	// BuildCache: its builds shared a --cache directory (docs/protocol.md).
	BuildCache bool `json:"buildCache,omitempty"`
	// Kernel is the user's kernel file the route built from (--kernel
	// NAME=KIND:FILE, docs/kernels.md), absent for every other route.
	Kernel *KernelFile `json:"kernel,omitempty"`
}

// KernelFile is a user's kernel file (--kernel NAME=KIND:FILE): stored as
// external/kernels/NAME/BASE, built by the built-in route kernel-KIND
// running under NAME, every build's source.
type KernelFile struct {
	Kind string `json:"kind"` // c
	ExternalFile
}

// DescribedName is the name the route's describe answer gives: Describes
// for an alias, else Name.
func (r Route) DescribedName() string {
	if r.Describes != "" {
		return r.Describes
	}
	return r.Name
}

// BuildsFor says whether the route builds for device ("cpu" or "cuda").
func (r Route) BuildsFor(device string) bool {
	if len(r.Devices) == 0 {
		return device == "cpu"
	}
	return slices.Contains(r.Devices, device)
}

// Build is one route's answer for one case.
type Build struct {
	Route  string    `json:"route"`
	Kind   string    `json:"kind"`
	Status string    `json:"status"`
	Reason string    `json:"reason"`
	Files  []FileRef `json:"files"`
	Entry  *Entry    `json:"entry,omitempty"`
	Link   []string  `json:"link,omitempty"`
	// Env: an object build's variables for its visits (ObjectEnv).
	Env       map[string]string `json:"env,omitempty"`
	Process   *Process          `json:"process,omitempty"`
	Schedule  map[string]any    `json:"schedule,omitempty"`
	Toolchain map[string]any    `json:"toolchain,omitempty"`
	Response  Digest            `json:"response,omitempty"`
	Stderr    Digest            `json:"stderr,omitempty"`
	Seconds   float64           `json:"seconds"`
	// RequiresCPU are the /proc/cpuinfo flags the build's code needs;
	// replay refuses to time it on a CPU without them.
	RequiresCPU []string    `json:"requiresCPU,omitempty"`
	Validation  *Validation `json:"validation,omitempty"`
}

// BelowBest is the build's schedule.below_best: why the code its visits
// run is slower than the best path this machine supports, as the route
// found it (the openblas and torch-eager routes: an OpenBLAS core type
// narrower than the CPU flags allow); "" where the route says nothing.
// Prepare copies it to the entry, replay to the entry's summary row, and
// the results table shows it.
func (b Build) BelowBest() (string, error) { return b.note("below_best") }

// note is the build's schedule field key, a note for people: a
// non-empty string, "" where absent, anything else an error naming it.
func (b Build) note(key string) (string, error) {
	v, ok := b.Schedule[key]
	if !ok {
		return "", nil
	}
	if s, ok := v.(string); ok && s != "" {
		return s, nil
	}
	return "", fmt.Errorf("schedule.%s: want a non-empty string, got %v", key, v)
}

// OwnGraphs is the build's schedule.own_graphs: why every call of the
// code its visits run replays CUDA graphs of its own (the torch-compile
// route under max-autotune: Inductor's cudagraph trees); "" where the
// route says nothing. Such a row's novel and warm figures are graph
// figures: replay takes no graph samples of it (a graph around a graph
// replay) and the results label it beside the other rows' graph samples
// (docs/gpu.md, "Graph samples"). Prepare copies it to the entry, replay
// to the entry's summary row.
func (b Build) OwnGraphs() (string, error) { return b.note("own_graphs") }

// ColdCost is what a JIT route's build measured once, in capture's build
// sandbox on the capture's machine (the torch-compile route): the first
// call of a process with an empty cache (trace, compile, autotune, first
// run: schedule.compile_first_call_s) and of a fresh process on a copy of
// the captured cache (load, first run: schedule.cached_first_call_s).
// Never part of a warm or novel time; prepare copies it to the entry,
// replay to the entry's summary row, and the results show it apart.
type ColdCost struct {
	CompileFirstCallS float64 `json:"compileFirstCallS"`
	CachedFirstCallS  float64 `json:"cachedFirstCallS"`
}

// Same says whether c and o are the same cold costs (both nil, or equal).
func (c *ColdCost) Same(o *ColdCost) bool {
	return (c == nil) == (o == nil) && (c == nil || *c == *o)
}

// Cold is the build's [ColdCost] (nil where its schedule has neither
// field), or why its schedule's fields are not one: both present,
// positive and finite.
func (b Build) Cold() (*ColdCost, error) {
	c, okc := b.Schedule["compile_first_call_s"]
	l, okl := b.Schedule["cached_first_call_s"]
	if !okc && !okl {
		return nil, nil
	}
	cv, okc := c.(float64)
	lv, okl := l.(float64)
	if !okc || !okl || !(cv > 0) || !(lv > 0) || math.IsInf(cv, 0) || math.IsInf(lv, 0) {
		return nil, fmt.Errorf("schedule.compile_first_call_s and cached_first_call_s: want two positive numbers of seconds, got %v and %v", c, l)
	}
	return &ColdCost{CompileFirstCallS: cv, CachedFirstCallS: lv}, nil
}

// Validation is capture's full check, against the FP64 oracle, of the
// outputs a validating route computed from the case's inputs in its build.
// A failed validation fails the build.
type Validation struct {
	Pass     bool    `json:"pass"`
	Reason   string  `json:"reason,omitempty"`
	MaxRatio float64 `json:"maxRatio"`
	Checked  int     `json:"checked"`
}

// ExternalFile is one file given to capture from outside (--ir, --abi),
// stored under Title and read from Source.
type ExternalFile struct {
	Title  string `json:"title"`  // layer title: external/ir/NAME or external/abi.json
	Source string `json:"source"` // absolute path it was read from
	Digest Digest `json:"digest"`
	Size   int64  `json:"size"`
}

// External is the IR and ABI a capture handed to the routes that accept
// IR (docs/protocol.md, external IR).
type External struct {
	IR  []ExternalFile `json:"ir"`
	ABI ExternalFile   `json:"abi"`
}

// CapturedCase is a case with its packet and every route's build.
type CapturedCase struct {
	Case      oracle.Case    `json:"case"`
	Signature []oracle.Param `json:"signature"`
	Generator string         `json:"generator"`
	Packet    Packet         `json:"packet"`
	Builds    []Build        `json:"builds"`
}

// CaptureDoc is the capture stage's document.
type CaptureDoc struct {
	Schema int    `json:"schema"`
	Cohort string `json:"cohort"`
	Rounds int    `json:"rounds,omitempty"` // the cohort's default replay rounds
	// Target is the cohort's default precision target in percent (0:
	// fixed rounds), absent where the cohort sets none.
	Target  *float64 `json:"target,omitempty"`
	Threads int      `json:"threads"`
	// Oracle is the oracle.Version that computed the packets' references
	// and bounds (empty in captures made before versions were recorded).
	Oracle string `json:"oracle,omitempty"`
	// CohortRules is the cohort.Rules the cohort was parsed by: 2, a
	// strict f32 matrix case takes the exact pattern (its default, and no
	// other). Absent (captures made before it): rule 1, every case's
	// default pattern normal. The audit parses cohort.json again by it.
	CohortRules int            `json:"cohortRules,omitempty"`
	Routes      []Route        `json:"routes"`
	Cases       []CapturedCase `json:"cases"`
	// External is what --ir and --abi gave, absent without them.
	External *External `json:"external,omitempty"`
}

// ClosureFile is one file a timed process maps, pinned by digest.
type ClosureFile struct {
	Path   string `json:"path"`
	Digest Digest `json:"digest"`
	Size   int64  `json:"size"`
}

// Prepared is one (case, route) made ready to time, or the reason it
// cannot be timed.
type Prepared struct {
	Case    string            `json:"case"`
	Route   string            `json:"route"`
	Kind    string            `json:"kind"`
	Status  string            `json:"status"`
	Reason  string            `json:"reason"`
	Program *FileRef          `json:"program,omitempty"` // linked harness or wrapper script
	Objects []FileRef         `json:"objects,omitempty"` // captured objects linked unchanged
	Process *Process          `json:"process,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Inputs  []TensorRef       `json:"inputs,omitempty"` // raw bytes
	Outputs []oracle.Param    `json:"outputs,omitempty"`
	Closure []ClosureFile     `json:"closure,omitempty"`
	// Kernel is what a cubin entry's timer loads: the captured cubin
	// (role "cubin") and its launch in the timer's line form (role
	// "launch", made by prepare from the captured manifest).
	Kernel []FileRef `json:"kernel,omitempty"`
	// Data is a process entry's cache files (role cache, from the
	// capture): replay copies them into a fresh directory for each visit
	// and fails the visit if any is added, removed or changed by it.
	Data []FileRef `json:"data,omitempty"`
	// Chain ties a cubin entry's cubin to its PTX: prepare built the PTX
	// again with ptxas and found the same code (docs/gpu.md, "The cubin
	// chain"); absent in entries prepared before it.
	Chain *CubinChain `json:"chain,omitempty"`
	// BelowBest is the capture build's [Build.BelowBest].
	BelowBest string `json:"belowBest,omitempty"`
	// OwnGraphs is the capture build's [Build.OwnGraphs].
	OwnGraphs string `json:"ownGraphs,omitempty"`
	// Cold is the capture build's [Build.Cold].
	Cold *ColdCost `json:"cold,omitempty"`
}

// CubinChain is how prepare tied a captured cubin to the PTX stored beside
// it: ptxas (found by tilepipe, never named by the route; its path,
// digest and first version line) run on the PTX with Args (the launch
// manifest's ptxas flags and --gpu-name, the PTX's .target) built Rebuilt,
// a layer of the prepared stage, whose code is the captured cubin's
// (internal/launch.SameCode: every section but debug information).
type CubinChain struct {
	PTX          Digest   `json:"ptx"`
	Cubin        Digest   `json:"cubin"`
	Rebuilt      FileRef  `json:"rebuilt"`
	Ptxas        string   `json:"ptxas"`
	PtxasDigest  Digest   `json:"ptxasDigest"`
	PtxasVersion string   `json:"ptxasVersion"`
	Args         []string `json:"args"`
}

// PreparedDoc is the prepare stage's document.
type PreparedDoc struct {
	Schema        int     `json:"schema"`
	Capture       Digest  `json:"capture"` // capture manifest
	Threads       int     `json:"threads"`
	HarnessSource FileRef `json:"harnessSource"`
	HarnessObject FileRef `json:"harnessObject"`
	// CUDATimer is the CUDA timer (harness.c with cuda/backend.c, built
	// with -DTILEPIPE_CUDA) and CUDASource its back end's source; both
	// absent when no entry runs on a GPU.
	CUDATimer  *FileRef `json:"cudaTimer,omitempty"`
	CUDASource *FileRef `json:"cudaSource,omitempty"`
	// CUDAObject is the CUDA timer's object, which object builds for a
	// GPU case link; CUDALib the directory prepare linked the CUDA
	// libraries from ("" where it found none).
	CUDAObject *FileRef   `json:"cudaObject,omitempty"`
	CUDALib    string     `json:"cudaLib,omitempty"`
	CC         []string   `json:"cc"`
	CCVersion  string     `json:"ccVersion"`
	Entries    []Prepared `json:"entries"`
}

// ReplayConfig are the replay parameters, recorded so resume and audit see
// the same plan.
type ReplayConfig struct {
	Rounds    int     `json:"rounds"`
	Samples   int     `json:"samples"`
	Singles   int     `json:"singles"`
	SampleMs  float64 `json:"sampleMs"`
	WarmupMs  float64 `json:"warmupMs"`
	TimeoutS  float64 `json:"timeoutS"`
	Threads   int     `json:"threads"`
	Baseline  string  `json:"baseline"`
	Seed      uint64  `json:"seed"`
	Bootstrap int     `json:"bootstrap"`
	// Interval is how each paired ratio's interval is computed:
	// "sign", the exact order statistics of the per-round ratios
	// (stats.SignRatios; no verdict below 6 rounds). Absent (replays made
	// before it) is the percentile bootstrap of Bootstrap resamples from
	// Seed, kept so their summaries recompute.
	Interval string `json:"interval,omitempty"`
	// Level is the level of each exact interval (IntervalLevel): LevelFixed
	// (0.95) in a replay of fixed rounds, LevelAdaptive (0.975) in an
	// adaptive one, whose stopping rule looks at the interval at every
	// block and would otherwise stop on a narrow, misplaced one more often
	// than 5% (docs/statistics.md, "Stopping and coverage"). Absent
	// (replays made before it): 0.95.
	Level float64 `json:"level,omitempty"`
	// NoSandbox: the visits ran without a sandbox (--no-sandbox); the
	// audit marks every row of such a replay.
	NoSandbox bool `json:"noSandbox,omitempty"`
	// Sets is the warm buffer sets of every visit (--sets).
	Sets int `json:"sets"`
	// L2 is the GPU visits' L2 policy (--l2): "warm", or "flush": a
	// buffer of twice the device's L2 is written before every sample,
	// outside its span (docs/gpu.md). Absent (replays made before it) is
	// warm. CPU visits are never flushed.
	L2 string `json:"l2,omitempty"`
	// GraphBatch is N, the logical calls of each CUDA graph a GPU visit
	// replays for its graph samples (--graph-batch; 0: none).
	GraphBatch int `json:"graphBatch,omitempty"`
	// Load is what a visit flagged for other load (VisitLoad.Loaded) does
	// to the paired ratios: "exclude" (the default) leaves out every round
	// in which the row's visit or its baseline's was flagged; "allow"
	// (--allow-load) keeps them. Absent (replays made before it) keeps
	// them too, as those replays did.
	Load string `json:"load,omitempty"`
	// Stage: the replay records each novel row's stage (Summary.StageNs),
	// which the audit then recomputes; absent in replays made before it,
	// whose rows carry none.
	Stage bool `json:"stage,omitempty"`
	// Target, BudgetS and MaxRounds make the replay adaptive
	// (docs/statistics.md, "Rounds to a precision target"): after the
	// Rounds every case gets, a case gets another block of rounds (one of
	// each balanced route order) while a paired ratio's exact interval (at
	// Level) is wider than ±Target (relative) of its median, no row of the case
	// has spent BudgetS seconds of visit time, and rounds remain below
	// MaxRounds. Target 0 (or absent): every case gets Rounds rounds.
	Target    float64 `json:"target,omitempty"`
	BudgetS   float64 `json:"budgetS,omitempty"`
	MaxRounds int     `json:"maxRounds,omitempty"`
	// TotalBudgetS is the visit time the whole adaptive replay may spend
	// (--budget), shared at every boundary by the cases that would go
	// on (adaptive.Share): a case whose next block what is left cannot
	// pay for stops, "replay budget spent". Absent (0): no such budget.
	TotalBudgetS float64 `json:"totalBudgetS,omitempty"`
	// FreshMin is sets.MinFresh: under visit protocol 3, the fewest fresh
	// sets a case got where that many fit in 64 MiB, one per fresh sample.
	// Protocol 4 takes no fresh samples (its novel slots are
	// sets.NovelSlots); replay still records it. Absent (replays made
	// before it): a case of a few MiB got one fresh set, so one sample.
	FreshMin int `json:"freshMin,omitempty"`
	// NovelRule is the rule by which replay sized every visit's novel
	// slots and the novel calls it judged (sets.Rule, docs/protocol.md
	// "Novel samples"): 2, a CUDA case's slots in device memory's budget
	// and the judged calls bounded by their outputs and oracle work.
	// Absent (replays made before it): rule 1, 8 MiB of slots on every
	// device and 700 judged calls a visit.
	NovelRule int `json:"novelRule,omitempty"`
	// Pin is what replay does with a visit's threads once its validation
	// calls have made the kernel's thread pools: "threads" (PinThreads) pins each of
	// them to one core of the visit's mask, in turn, and reads every
	// thread's mask back after the samples (VisitResult.Pins). Absent
	// (replays made before it): the visit's process had its mask, and its
	// threads ran where the kernel's runtime put them.
	Pin string `json:"pin,omitempty"`
	// Shard is the part of the plan this replay times (--shard I/N): the
	// cases whose place in the capture is I modulo N (internal/shard),
	// every visit of theirs, so each paired ratio compares visits of one
	// machine in one round. Absent: the whole plan.
	Shard ShardSpec `json:"shard,omitzero"`
}

// ShardSpec is shard Index of Count (ReplayConfig.Shard).
type ShardSpec struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// String is I/N, as --shard takes it.
func (s ShardSpec) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// PinThreads is ReplayConfig.Pin of replays that pin every thread of a
// visit to one core.
const PinThreads = "threads"

// Interval levels (ReplayConfig.Level).
const (
	LevelFixed    = 0.95
	LevelAdaptive = 0.975
)

// LevelFor is the level the rule gives the intervals of a replay of
// this target (0: fixed rounds).
func LevelFor(target float64) float64 {
	if target > 0 {
		return LevelAdaptive
	}
	return LevelFixed
}

// IntervalLevel is the level the replay's exact intervals are computed
// at: Level, or 0.95 where it is absent.
func (c ReplayConfig) IntervalLevel() float64 {
	if c.Level == 0 {
		return LevelFixed
	}
	return c.Level
}

// PlannedRounds is the most rounds the replay can run: MaxRounds when it
// is adaptive, else Rounds. Input seeds are drawn for all of them.
func (c ReplayConfig) PlannedRounds() int {
	if c.Target > 0 {
		return max(c.MaxRounds, c.Rounds)
	}
	return c.Rounds
}

// Load rules (ReplayConfig.Load).
const (
	LoadExclude = "exclude"
	LoadAllow   = "allow"
)

// IntervalSign is ReplayConfig.Interval's exact interval.
const IntervalSign = "sign"

// L2 policies of GPU visits (ReplayConfig.L2).
const (
	L2Warm  = "warm"
	L2Flush = "flush"
)

// Sandbox is the bubblewrap that contained every visit of a replay
// (docs/threat-model.md).
type Sandbox struct {
	Program string   `json:"program"`
	Version string   `json:"version"`
	Flags   []string `json:"flags"` // what every visit got; each visit's argv adds its mounts
}

// InputSeeds are a replay's input seeds (internal/sets): one for warm set
// 0 of every case, one per round for every other set.
type InputSeeds struct {
	Replay uint64   `json:"replay"`
	Rounds []uint64 `json:"rounds"`
}

// Pair names one row of a checkpoint, a case timed with a route: the key
// every stage and the audit index rows, visits, entries and summaries by.
type Pair struct{ Case, Route string }

// String is "case/route", as errors and progress lines name a row.
func (p Pair) String() string { return p.Case + "/" + p.Route }

// Pair is the visit's row (a VisitResult's too).
func (v Visit) Pair() Pair { return Pair{v.Case, v.Route} }

// Pair is the summary's row.
func (s Summary) Pair() Pair { return Pair{s.Case, s.Route} }

// Pair is the entry's row.
func (e Prepared) Pair() Pair { return Pair{e.Case, e.Route} }

// Visit is one planned process run: a case with a route in a round.
type Visit struct {
	Index    int    `json:"index"`
	Round    int    `json:"round"`
	Position int    `json:"position"` // route position within the case's turn
	Case     string `json:"case"`
	Route    string `json:"route"`
}

// Session is one invocation of replay on a directory (the first, then one
// per --resume), with the time it finished re-hashing what it consumes.
type Session struct {
	Index    int       `json:"index"`
	Started  time.Time `json:"started"`
	Verified time.Time `json:"verified"`
	// ColdBandwidth is the machine's read+write bandwidth from memory
	// (bytes/s, internal/floors) to one thread, measured as the session
	// began: what the progress line reports; visit protocol 3 bounded its
	// fresh calls with it.
	ColdBandwidth float64 `json:"coldBandwidth"`
	// ClockHz is one core's measured clock (internal/floors.Clock), and
	// Floors every case's physical floors measured as the session began.
	ClockHz float64     `json:"clockHz"`
	Floors  []CaseFloor `json:"floors"`
	// GPU is what the GPU delivered, measured by the prepared CUDA timer
	// (`cuda-timer --ceilings`) as the session began, when a GPU case was
	// planned; the GPU cases' floors follow from it. GPUError says why it
	// was not measured (no GPU, no CUDA timer, a driver error).
	GPU      *GPUCeilings `json:"gpu,omitempty"`
	GPUError string       `json:"gpuError,omitempty"`
	// Telemetry names what read the GPU around every GPU sample (NVML:
	// the device, its PCI bus id and the driver); TelemetryError why
	// nothing could, after which every GPU visit fails.
	Telemetry      string `json:"telemetry,omitempty"`
	TelemetryError string `json:"telemetryError,omitempty"`
	// Cores is where the session put its visits and itself
	// (internal/affinity): the visits' cores, replay's, and whether the
	// machine had too few to keep them apart; absent in replays made
	// before it was recorded.
	Cores *CorePlan `json:"cores,omitempty"`
}

// CorePlan is a session's split of the cores between its visits' timed
// threads and replay's own (internal/affinity.Plan).
type CorePlan struct {
	Visit  []int  `json:"visit"`
	Replay []int  `json:"replay"`
	Shared bool   `json:"shared"`
	Why    string `json:"why"`
}

// GPUCeilings is one GPU's measured ceilings (docs/gpu.md, "Ceilings"):
// the device-to-device copy bandwidth over CopyBytes (read plus written)
// and the cublasGemmEx rate per dtype and policy. GemmError says why no
// rate was measured (cuBLAS not found or failing). CopyWorstNs (and each
// rate's WorstNs) is the slowest of the five timed runs whose best is
// CopyNs: the ceiling's own spread, from which its floor's slack follows
// (internal/floors.GPUSlack); 0 in ceilings recorded before it was kept,
// whose floors keep slack 2.
type GPUCeilings struct {
	Device        string     `json:"device"`
	L2Bytes       int64      `json:"l2Bytes"`
	CopyBytes     int64      `json:"copyBytes"`
	CopyReps      int64      `json:"copyReps"`
	CopyNs        float64    `json:"copyNs"`
	CopyWorstNs   float64    `json:"copyWorstNs,omitempty"`
	CopyBandwidth float64    `json:"copyBandwidth"` // bytes/s
	Gemm          []GemmRate `json:"gemm"`
	GemmError     string     `json:"gemmError,omitempty"`
}

// GemmRate is the rate of an N^3 cublasGemmEx (Reps of them in Ns, the
// best of five; WorstNs the slowest of them) in one dtype and policy
// ("strict" or "tf32" for f32, "" for the half types).
type GemmRate struct {
	Dtype   string  `json:"dtype"`
	Policy  string  `json:"policy"`
	N       int     `json:"n"`
	Reps    int64   `json:"reps"`
	Ns      float64 `json:"ns"`
	WorstNs float64 `json:"worstNs,omitempty"`
	Flops   float64 `json:"flops"` // flop/s
}

// CaseFloor is how fast one case can possibly run on the replay machine
// (internal/floors): its bytes at the bandwidth measured for its warm
// working set, its flops at the measured clock times the flags' vector
// width, each divided by a slack. A row faster than either fails.
// MemorySlack and ComputeSlack are a GPU floor's slacks, derived from its
// ceilings' spread, and L2Bytes the cache it leaves free of charge
// (internal/floors.GPUCase); all three absent where the slack is
// floors.Slack and no cache is left out (every CPU floor, and a GPU floor
// from ceilings that kept no spread).
type CaseFloor struct {
	Case string `json:"case"`
	// Device is "cuda" for a GPU case's floor, from the session's GPU
	// ceilings (internal/floors.GPUCase); absent for the CPU's.
	Device       string  `json:"device,omitempty"`
	Bytes        int     `json:"bytes"`      // what one call must read and write
	WorkingSet   int     `json:"workingSet"` // every warm set's bytes
	Bandwidth    float64 `json:"bandwidth"`  // bytes/s, measured for the working set
	MemoryNs     float64 `json:"memoryNs"`
	Flops        float64 `json:"flops,omitempty"`
	PeakFlops    float64 `json:"peakFlops,omitempty"`
	ISA          string  `json:"isa,omitempty"`
	ComputeNs    float64 `json:"computeNs,omitempty"`
	L2Bytes      int64   `json:"l2Bytes,omitempty"`
	MemorySlack  float64 `json:"memorySlack,omitempty"`
	ComputeSlack float64 `json:"computeSlack,omitempty"`
}

// GPUIdle is a visit's idle probes: how many, and the slowest in ns.
type GPUIdle struct {
	Probes  int   `json:"probes"`
	WorstNs int64 `json:"worstNs"`
	// WorstWaitNs is the longest any probe's thread waited for a CPU
	// (-1: unknown; absent in replays made before it was measured): a
	// slow probe the host's CPUs delayed says so.
	WorstWaitNs int64 `json:"worstWaitNs,omitempty"`
}

// NovelRecord is how a visit's novel samples were taken: Samples samples
// of Calls calls each over the visit's novel slots, its FreshSets (Calls
// is the warm calibration's calls per sample, at most the slots); novel
// call g (call
// g mod Calls of sample g / Calls) ran on novel set g of its case and
// round. Checked are the calls replay judged in full (drawn after each
// sample; visit.ChecksPerSample of each, in increasing order), Outputs
// their outputs ([len(Checked), shape...] per output param).
type NovelRecord struct {
	Samples int         `json:"samples"`
	Calls   int64       `json:"calls"`
	Checked []int64     `json:"checked"`
	Outputs []TensorRef `json:"outputs"`
	// FreezeNs is the median of the idle visit's thaw-and-freeze cycles
	// after its last novel sample (visit.FreezeCycle): with the channel,
	// what each novel sample's span holds once beyond its calls. For the
	// report only; absent in replays made before it.
	FreezeNs int64 `json:"freezeNs,omitempty"`
}

// VisitResult is what one visit produced.
type VisitResult struct {
	Visit
	Session        int               `json:"session"`
	Status         string            `json:"status"`
	Reason         string            `json:"reason"`
	Checks         map[string]string `json:"checks,omitempty"`
	CallsPerSample int64             `json:"callsPerSample"`
	// ColdNs is the timer's first call timed on its own (the validated
	// report's cold_ns): what the library's lazy initialisation and, on a
	// GPU, the module load cost once; never part of a sample.
	ColdNs       int64  `json:"coldNs,omitempty"`
	Threads      int    `json:"threads"`
	OutputPolicy string `json:"outputPolicy,omitempty"`
	// Sets and FreshSets are the visit's warm buffer sets and novel slots
	// (docs/protocol.md); FreshCalls is always 0 (visit protocol 3's fresh
	// calls; written, as the field is not omitempty).
	Sets       int   `json:"sets"`
	FreshSets  int   `json:"freshSets"`
	FreshCalls int64 `json:"freshCalls"`
	// Fill is the visit's draw (hex) for its outputs' fill pattern;
	// MallocPerturb the glibc allocator fill byte it ran with.
	Fill          string `json:"fill"`
	MallocPerturb int    `json:"mallocPerturb"`
	// FreshNs, WarmNs and FreshBoundNs were visit protocol 3's fresh and
	// warm time per call and its bound; replay no longer writes them.
	FreshNs      float64 `json:"freshNs,omitempty"`
	WarmNs       float64 `json:"warmNs,omitempty"`
	FreshBoundNs float64 `json:"freshBoundNs,omitempty"`
	// Outputs are every warm set's validated outputs (shape [sets, ...]);
	// FreshOutputs were protocol 3's fresh calls' (no longer written).
	Outputs      []TensorRef `json:"outputs,omitempty"`
	FreshOutputs []TensorRef `json:"freshOutputs,omitempty"`
	// Set0 is the SHA-256 (hex) of warm set 0's outputs, concatenated in
	// signature order: set 0 has the same inputs in every visit of a case,
	// so every visit of a (case, route) must give the same bytes.
	Set0        string  `json:"set0,omitempty"`
	MaxErrRatio float64 `json:"maxErrRatio"`
	// Graph is how a GPU visit's graph samples were taken, when the
	// replay asked for them (config.graphBatch).
	Graph *GraphRecord `json:"graph,omitempty"`
	// Novel is the visit's novel samples (visit protocol 4,
	// docs/protocol.md): every passed visit has them.
	Novel *NovelRecord `json:"novel,omitempty"`
	// GPUIdle is a GPU visit's idle probes: the telemetry monitor's empty
	// kernel, timed before every sample command and after every report
	// (internal/telemetry.BusyNs, docs/gpu-clock.md); absent on the CPU and
	// in replays made before the probe.
	GPUIdle *GPUIdle `json:"gpuIdle,omitempty"`
	Samples Digest   `json:"samples,omitempty"` // per-visit Arrow table
	Stdout  Digest   `json:"stdout,omitempty"`
	Stderr  Digest   `json:"stderr,omitempty"`
	Exit    int      `json:"exit"`
	// Argv is what replay started: the sandbox with its mounts, then the timer.
	Argv []string `json:"argv,omitempty"`
	// CPUNs is the CPU time of every process the visit started, WallNs its
	// wall time, both measured by replay.
	CPUNs  int64 `json:"cpuNs"`
	WallNs int64 `json:"wallNs"`
	// Throttled: 100 ms periods in which the visit hit its CPU quota.
	Throttled int64 `json:"throttled,omitempty"`
	// Load is what the machine did besides the visit and replay while it
	// ran (internal/load); absent in replays made before it was measured.
	Load *VisitLoad `json:"load,omitempty"`
	// Cores is the CPU mask of the visit's top process, read back from the
	// kernel as it started (its threads and children inherit it); absent
	// in replays made before it was recorded.
	Cores []int `json:"cores,omitempty"`
	// Pins is where the visit's threads ran once replay had pinned them one
	// to a core (before the warm-up, ReplayConfig.Pin), read back after the
	// samples: a record for each process of the visit; absent in replays
	// that do not pin and in visits that failed before the read-back.
	Pins  []ThreadPins `json:"pins,omitempty"`
	Start time.Time    `json:"start"`
	End   time.Time    `json:"end"`
}

// ThreadPins is one process of a visit (Comm, its name in /proc) and the
// core of each of its threads, in thread-id order.
type ThreadPins struct {
	Comm  string `json:"comm"`
	Cores []int  `json:"cores"`
}

// VisitLoad is the other load a visit overlapped: CPU time of processes
// that were neither the visit's nor replay's (all CPUs, from /proc/stat),
// and the time the hypervisor took the CPUs away. Loaded: together more
// than a quarter of a core over the visit's wall time (load.Loaded).
type VisitLoad struct {
	OtherNs int64 `json:"otherNs"`
	StealNs int64 `json:"stealNs"`
	Loaded  bool  `json:"loaded"`
}

// GraphRecord is the methodology's adaptive_replay_span_v2 for one visit
// (docs/gpu.md, "Graph samples"): a graph of Batch logical calls, the
// events' span of its untimed first replay (FirstNs), a warm-up of
// replays for at least WarmupTargetNs (WarmupReplays replays took
// WarmupNs), calibration Attempts from one replay, each below 80% of
// TargetNs scaling the count up to the target, capped at MaxReplays and
// MaxCalls logical calls, and Replays, the last measured count, fixed for
// every graph sample. Spans are CUDA-event spans.
type GraphRecord struct {
	Protocol       string         `json:"protocol"`
	Batch          int64          `json:"batch"`
	FirstNs        int64          `json:"firstNs"`
	WarmupTargetNs int64          `json:"warmupTargetNs"`
	WarmupNs       int64          `json:"warmupNs"`
	WarmupReplays  int64          `json:"warmupReplays"`
	TargetNs       int64          `json:"targetNs"`
	MaxReplays     int64          `json:"maxReplays"`
	MaxCalls       int64          `json:"maxCalls"`
	Attempts       []GraphAttempt `json:"attempts"`
	Replays        int64          `json:"replays"`
}

// GraphAttempt is one calibration measurement: Replays graph replays in Ns.
type GraphAttempt struct {
	Replays int64 `json:"replays"`
	Ns      int64 `json:"ns"`
}

// Reasons of planned visits replay did not run: a failed binary closure
// check stops the replay (such a visit has no journal line), and a GPU
// that fails its health check after a visit's CUDA error is not used again
// (NotRunGPU, then the visit and the check's error).
const (
	NotRunClosure = "not_run: replay stopped after a binary closure check failed"
	NotRunGPU     = "not_run: the GPU failed its health check after the CUDA error of "
)

// ClosureCheck is the re-hash of every binary closure around one round.
type ClosureCheck struct {
	Round  int       `json:"round"`
	When   string    `json:"when"` // before or after
	At     time.Time `json:"at"`
	Files  int       `json:"files"`
	Status string    `json:"status"`
	Reason string    `json:"reason,omitempty"`
}

// Summary is the timing summary of one case and route over all rounds.
type Summary struct {
	Case   string `json:"case"`
	Route  string `json:"route"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	Visits int    `json:"visits"`
	// Kind is the sample kind the times and ratio below rest on: "novel"
	// (visit protocol 4) on every passed row; absent on a row that was not
	// timed.
	Kind     string  `json:"kind,omitempty"`
	Samples  int     `json:"samples"`
	MedianNs float64 `json:"medianNs"`
	MinNs    float64 `json:"minNs"`
	MaxNs    float64 `json:"maxNs"`
	Q1Ns     float64 `json:"q1Ns"`
	Q3Ns     float64 `json:"q3Ns"`
	// WarmNs is a novel row's median time per call of its warm (batch)
	// samples, the same inputs called again and again: a secondary
	// figure (MLPerf's cache benefit is WarmNs / MedianNs), never a claim.
	WarmNs float64 `json:"warmNs,omitempty"`
	// SingleNs is the median of a row's single-call samples (each one
	// call timed alone, on a warm set), under novel rule 2: with WarmNs it
	// gives the fixed cost of a sample, single − warm, whose share of the
	// novel time the results table shows for GPU rows. Absent in replays
	// made under rule 1.
	SingleNs float64 `json:"singleNs,omitempty"`
	// ChannelNs is the median span of the empty samples: replay's round
	// trip to the timer, which every batch sample's span includes once.
	ChannelNs float64 `json:"channelNs"`
	// StageNs is the median, over a row's novel samples on replay's clock,
	// of replay's span beyond the timer's own number (span − timer): what
	// each novel sample's time holds beyond its calls. On a GPU that is
	// the stage (mapping the staged slots and unmapping them, the channel,
	// the freeze, the closing idle probe, docs/gpu-clock.md), which grows
	// with the bytes staged; its share of the row's novel time (StageNs /
	// (calls a sample × MedianNs)) says how far the claim is the protocol's
	// own cost rather than the calls'. A disclosure, never subtracted: the
	// timer's number is within reach of object and process routes. Absent
	// where no novel sample carries a timer number, and in replays made
	// before it.
	StageNs float64 `json:"stageNs,omitempty"`
	// GraphNs and GraphMinNs are the median and the least time per call
	// of the graph samples (a GPU visit's CUDA-graph replays, config.
	// graphBatch), apart from the stream samples above; 0 without them.
	GraphNs    float64 `json:"graphNs,omitempty"`
	GraphMinNs float64 `json:"graphMinNs,omitempty"`
	// Flagged counts the row's samples (of every kind) whose GPU
	// telemetry flags them: throttled for power or heat, or another
	// process on the GPU (samples.Flags). They stay in every statistic.
	Flagged int `json:"flagged,omitempty"`
	// Paired ratio route/baseline over rounds (time ratio: < 1 is faster).
	Ratio      float64 `json:"ratio,omitempty"`
	RatioMin   float64 `json:"ratioMin,omitempty"`
	RatioMax   float64 `json:"ratioMax,omitempty"`
	RatioLo    float64 `json:"ratioLo,omitempty"`
	RatioHi    float64 `json:"ratioHi,omitempty"`
	RatioPairs int     `json:"ratioPairs,omitempty"`
	Verdict    string  `json:"verdict,omitempty"`
	// RatioExcluded counts the rounds left out of the paired ratio
	// because the row's visit or its baseline's overlapped other load
	// (config.load "exclude").
	RatioExcluded int `json:"ratioExcluded,omitempty"`
	// Precision is the paired ratio's interval's larger half-width
	// relative to its median (adaptive replays only; 0 without an exact
	// interval): the row reached config.target when it is at most that.
	Precision float64 `json:"precision,omitempty"`
	// BelowBest is the prepared entry's: why the row's code is not the
	// best path this machine supports ("" where nothing says so).
	BelowBest string `json:"belowBest,omitempty"`
	// OwnGraphs is the prepared entry's: why every call of the row is a
	// CUDA graph replay of the route's own ("" for other rows).
	OwnGraphs string `json:"ownGraphs,omitempty"`
	// Cold is the prepared entry's: the build's cold costs, shown apart.
	Cold *ColdCost `json:"cold,omitempty"`
}

// CaseStop is where an adaptive replay stopped giving a case rounds, and
// why (internal/adaptive's reasons).
type CaseStop struct {
	Case   string `json:"case"`
	Rounds int    `json:"rounds"`
	Stop   string `json:"stop"`
}

// ReplayDoc is the replay stage's document.
type ReplayDoc struct {
	Schema   int          `json:"schema"`
	Prepared Digest       `json:"prepared"` // prepared manifest
	Capture  Digest       `json:"capture"`  // capture manifest
	Config   ReplayConfig `json:"config"`
	Routes   []string     `json:"routes"`
	Cases    []string     `json:"cases"`
	Plan     []Visit      `json:"plan"`
	// Inputs are the seeds replay drew for every buffer set it timed.
	Inputs  InputSeeds `json:"inputs"`
	Sandbox *Sandbox   `json:"sandbox"` // nil: --no-sandbox
	// CPULimit says what capped each visit's CPU ("none: why" where the
	// machine gives replay no cgroup with a CPU quota).
	CPULimit string         `json:"cpuLimit"`
	Sessions []Session      `json:"sessions"`
	Visits   []VisitResult  `json:"visits"`
	Closure  []ClosureCheck `json:"closure"`
	Samples  Digest         `json:"samples"` // all samples, one Arrow table
	Summary  []Summary      `json:"summary"`
	// Stops: where an adaptive replay (config.target) stopped each case,
	// and why; Plan then holds the visits the cases got, the fixed rounds'
	// (plan.json's plan) first.
	Stops []CaseStop `json:"stops,omitempty"`
	// Merge: this replay is the merge of shard replays (tilepipe merge),
	// made from their raw samples. Plan, Visits, Sessions, Closure and
	// Stops are theirs in shard order, renumbered (internal/shard.Combine);
	// the visits' own blobs stay in the shard stages, which the audit
	// opens and re-verifies. Absent: a replay of its own.
	Merge *MergeRecord `json:"merge,omitempty"`
}

// MergeRecord lists the shards a merged replay was made from.
type MergeRecord struct {
	Shards []ShardRef `json:"shards"`
	// Mixed says how the shards' machines differ (merge --allow-mixed);
	// empty when they are comparable (internal/shard.Machine). A mixed
	// merge marks every row with the machine it ran on.
	Mixed []string `json:"mixed"`
}

// ShardRef is one shard of a merged replay.
type ShardRef struct {
	Shard ShardSpec `json:"shard"`
	// Manifest is the shard stage's manifest; Path where merge found it,
	// relative to the merged stage's directory when it can be.
	Manifest Digest   `json:"manifest"`
	Path     string   `json:"path"`
	Cases    []string `json:"cases"`
	// VisitOffset and SessionOffset are where the shard's visits and
	// sessions begin in the merged lists.
	VisitOffset   int `json:"visitOffset"`
	SessionOffset int `json:"sessionOffset"`
	// Machine is the shard's machine (internal/shard.Machine): host, CPU
	// model, cores, GPU.
	Machine string `json:"machine"`
}

// PlanRecord is a replay's plan.json: what a replay directory is replaying,
// written before the first visit, read by --resume and by the audit. An
// adaptive replay's plan is its fixed rounds; the rounds the stopping rule
// adds follow from the samples (the document's plan holds them all), and
// Inputs holds seeds for config.PlannedRounds() rounds.
type PlanRecord struct {
	Prepared Digest       `json:"prepared"`
	Capture  Digest       `json:"capture"`
	Config   ReplayConfig `json:"config"`
	Routes   []string     `json:"routes"`
	Cases    []string     `json:"cases"`
	Plan     []Visit      `json:"plan"`
	Inputs   InputSeeds   `json:"inputs"`
}

// JournalLine is one line of a replay's journal.jsonl, one checkpoint: a
// session's start, a finished visit or a binary closure check.
type JournalLine struct {
	Session *Session      `json:"session,omitempty"`
	Visit   *VisitResult  `json:"visit,omitempty"`
	Closure *ClosureCheck `json:"closure,omitempty"`
}

// ObjectEnv are the variables an object build may set for its visits:
// OpenBLAS's core type, so a baseline runs the kernels its CPU allows
// (issue 12). Nothing that reaches the loader or the C library
// (LD_PRELOAD, GLIBC_TUNABLES, ...): an object build's visits run
// tilepipe's timer.
var ObjectEnv = []string{"OPENBLAS_CORETYPE"}

var envValueRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,32}$`)

// CheckObjectEnv refuses an object build's env that sets anything but
// ObjectEnv, or a value that is not a plain word.
func CheckObjectEnv(env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !slices.Contains(ObjectEnv, k) {
			return fmt.Errorf("env.%s: an object build's visits run tilepipe's timer, which takes only %s", k, strings.Join(ObjectEnv, ", "))
		}
		if !envValueRE.MatchString(env[k]) {
			return fmt.Errorf("env.%s %q: want 1 to 32 letters, digits or underscores", k, env[k])
		}
	}
	return nil
}
