package artifacts

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// In-toto Statement v1 identifiers.
const (
	StatementType    = "https://in-toto.io/Statement/v1"
	ReceiptPredicate = "https://tilepipe.dev/receipt/v1"
	AuditPredicate   = "https://tilepipe.dev/audit/v1"
)

// Statement is an in-toto Statement v1 with a typed predicate.
type Statement[P any] struct {
	Type          string    `json:"_type"`
	Subject       []Subject `json:"subject"`
	PredicateType string    `json:"predicateType"`
	Predicate     P         `json:"predicate"`
}

// Subject is one product of a stage, named by its title.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// SubjectOf makes the in-toto subject of a titled layer.
func SubjectOf(title string, d ocispec.Descriptor) Subject {
	return Subject{Name: title, Digest: map[string]string{string(d.Digest.Algorithm()): d.Digest.Encoded()}}
}

// Receipt is the predicate each stage writes, shaped like SLSA provenance:
// what ran (tool, parameters), what it consumed (resolved dependencies, each
// with the time its bytes were re-hashed), where (environment) and how
// (commands).
type Receipt struct {
	Stage                string            `json:"stage"`
	Tool                 Tool              `json:"tool"`
	Parameters           map[string]any    `json:"parameters"`
	Predecessor          *Dependency       `json:"predecessor,omitempty"`
	ResolvedDependencies []Dependency      `json:"resolvedDependencies"`
	Environment          Environment       `json:"environment"`
	Commands             []Command         `json:"commands"`
	StartedOn            time.Time         `json:"startedOn"`
	FinishedOn           time.Time         `json:"finishedOn"`
	Notes                map[string]string `json:"notes,omitempty"`
}

// Tool identifies the tilepipe binary that wrote a receipt.
type Tool struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Revision string `json:"revision"`
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
}

// Dependency is one consumed blob (or stage manifest) and when its bytes
// were last verified. In JSON it is an in-toto ResourceDescriptor:
// {"name", "digest": {"sha256": HEX}, "annotations": {"verifiedAt"}};
// receipts written before that had the digest as a string and verifiedAt
// beside it, which reading still takes.
type Dependency struct {
	Name       string
	Digest     Digest
	VerifiedAt time.Time
}

// resourceDescriptor is Dependency's JSON.
type resourceDescriptor struct {
	Name        string            `json:"name"`
	Digest      map[string]string `json:"digest"`
	Annotations struct {
		VerifiedAt time.Time `json:"verifiedAt"`
	} `json:"annotations"`
}

// MarshalJSON writes d as an in-toto ResourceDescriptor.
func (d Dependency) MarshalJSON() ([]byte, error) {
	alg, hex, _ := strings.Cut(string(d.Digest), ":")
	r := resourceDescriptor{Name: d.Name, Digest: map[string]string{alg: hex}}
	r.Annotations.VerifiedAt = d.VerifiedAt
	return json.Marshal(r)
}

// UnmarshalJSON reads a ResourceDescriptor with one sha256 digest, or the
// form of receipts written before it; unknown fields are refused.
func (d *Dependency) UnmarshalJSON(b []byte) error {
	if old, err := strictDecode[struct {
		Name       string    `json:"name"`
		Digest     Digest    `json:"digest"`
		VerifiedAt time.Time `json:"verifiedAt"`
	}](b); err == nil {
		dg, err := ParseDigest(string(old.Digest))
		if err != nil {
			return fmt.Errorf("dependency %q: %w", old.Name, err)
		}
		*d = Dependency{Name: old.Name, Digest: dg, VerifiedAt: old.VerifiedAt}
		return nil
	}
	r, err := strictDecode[resourceDescriptor](b)
	if err != nil {
		return fmt.Errorf("dependency: %w", err)
	}
	hex, ok := r.Digest["sha256"]
	if len(r.Digest) != 1 || !ok {
		return fmt.Errorf("dependency %q: digest %v: want exactly {\"sha256\": HEX}", r.Name, r.Digest)
	}
	dg, err := ParseDigest("sha256:" + hex)
	if err != nil {
		return fmt.Errorf("dependency %q: %w", r.Name, err)
	}
	*d = Dependency{Name: r.Name, Digest: dg, VerifiedAt: r.Annotations.VerifiedAt}
	return nil
}

// strictDecode is strictJSON into a new T.
func strictDecode[T any](b []byte) (T, error) {
	var v T
	err := strictJSON(b, &v)
	return v, err
}

// Command is one external program a stage ran.
type Command struct {
	Argv     []string          `json:"argv"`
	EnvDelta map[string]string `json:"envDelta,omitempty"`
	Dir      string            `json:"dir,omitempty"`
	Exit     int               `json:"exit"`
	Stdout   Digest            `json:"stdout,omitempty"`
	Stderr   Digest            `json:"stderr,omitempty"`
}

// Environment is the fingerprint of the machine a stage ran on.
type Environment struct {
	Hostname   string   `json:"hostname"`
	OS         string   `json:"os"`
	Arch       string   `json:"arch"`
	Kernel     string   `json:"kernel"`
	CPUModel   string   `json:"cpuModel"`
	CPUFlags   []string `json:"cpuFlags"`
	CPUMHz     float64  `json:"cpuMHz"` // highest clock /proc/cpuinfo reports
	CPUs       int      `json:"cpus"`
	Governor   string   `json:"governor"`
	MemTotalKB int64    `json:"memTotalKB"`
	GPU        string   `json:"gpu,omitempty"`
	// GPUClocks are the GPU's maximum SM and memory clocks (nvidia-smi).
	GPUClocks string            `json:"gpuClocks,omitempty"`
	Compilers map[string]string `json:"compilers"`
	EnvVars   map[string]string `json:"envVars,omitempty"`
}

// ToolInfo reads the running binary's version and VCS revision.
func ToolInfo() Tool {
	t := Tool{Name: "tilepipe", Version: "devel", Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			t.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				t.Revision = s.Value
			case "vcs.modified":
				t.Modified = s.Value == "true"
			}
		}
	}
	return t
}

// fingerprintVars are environment variables that change what is measured.
var fingerprintVars = []string{"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "MKL_NUM_THREADS", "HL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "LD_PRELOAD"}

// Fingerprint reads the environment of this machine.
func Fingerprint() Environment {
	e := Environment{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Compilers: map[string]string{}, EnvVars: map[string]string{}}
	e.Hostname, _ = os.Hostname()
	e.Kernel = readTrim("/proc/sys/kernel/osrelease")
	e.Governor = readTrim("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
	if e.Governor == "" {
		e.Governor = "unknown (no cpufreq)"
	}
	if f, err := os.Open(CPUInfoPath); err == nil {
		e.CPUModel, e.CPUMHz, e.CPUFlags, _ = parseCPUInfo(f)
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "MemTotal:") {
				var kb int64
				for _, fld := range strings.Fields(sc.Text())[1:2] {
					for _, c := range fld {
						kb = kb*10 + int64(c-'0')
					}
				}
				e.MemTotalKB = kb
			}
		}
		f.Close()
	}
	if out, err := exec.Command("cc", "--version").Output(); err == nil {
		e.Compilers["cc"] = firstLine(string(out))
	}
	if out, err := exec.Command("nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader").Output(); err == nil {
		e.GPU = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("nvidia-smi", "--query-gpu=clocks.max.sm,clocks.max.memory", "--format=csv,noheader").Output(); err == nil {
		e.GPUClocks = strings.TrimSpace(string(out))
	}
	for _, k := range fingerprintVars {
		if v, ok := os.LookupEnv(k); ok {
			e.EnvVars[k] = v
		}
	}
	return e
}

// CPUInfoPath is where Linux describes the CPUs.
const CPUInfoPath = "/proc/cpuinfo"

// CPUFlags reads the feature flags of the first CPU listed in the cpuinfo
// file at path (normally [CPUInfoPath]), sorted. A file that cannot be
// read or has no flags line is an error, so callers that gate on features
// fail closed.
func CPUFlags(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	_, _, flags, err := parseCPUInfo(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if flags == nil {
		return nil, fmt.Errorf("%s: no flags line", path)
	}
	return flags, nil
}

// parseCPUInfo reads the first model name, the highest clock and the first
// flags line (sorted) of a cpuinfo file.
func parseCPUInfo(r io.Reader) (model string, mhz float64, flags []string, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case k == "model name" && model == "":
			model = v
		case k == "cpu MHz":
			if x, err := strconv.ParseFloat(v, 64); err == nil && x > mhz {
				mhz = x
			}
		case k == "flags" && flags == nil:
			flags = strings.Fields(v)
			sort.Strings(flags)
		}
	}
	return model, mhz, flags, sc.Err()
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(l)
}
