package depcheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/tilepipe/tilepipe"

var stages = []string{"capture", "prepare", "replay", "audit"}

// rel is p relative to the module, or "" for a package outside it.
func rel(p string) string {
	if p == module {
		return "."
	}
	if r, ok := strings.CutPrefix(p, module+"/"); ok {
		return r
	}
	return ""
}

// under reports whether module-relative package r is dir or inside it.
func under(r, dir string) bool { return r == dir || strings.HasPrefix(r, dir+"/") }

// stageOf is the stage module-relative package r belongs to, or "".
func stageOf(r string) string {
	for _, s := range stages {
		if under(r, s) {
			return s
		}
	}
	return ""
}

// std reports whether an import path is in the standard library: its
// first element has no dot.
func std(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

// check returns one message per forbidden edge of imports (package ->
// its non-test imports), sorted.
func check(imports map[string][]string) []string {
	var bad []string
	for pkg, imps := range imports {
		from := rel(pkg)
		if from == "" {
			continue
		}
		fromStage := stageOf(from)
		for _, imp := range imps {
			to := rel(imp)
			toStage := stageOf(to)
			switch {
			case under(from, "oracle") && !std(imp) && !strings.HasPrefix(imp, "gonum.org/"):
				bad = append(bad, fmt.Sprintf("%s imports %s: oracle imports only the standard library and gonum.org/...", from, imp))
			case under(from, "artifacts") && under(to, "internal"):
				bad = append(bad, fmt.Sprintf("%s imports %s: the store imports nothing from internal/; what it needs is its own (artifacts/...)", from, to))
			case toStage == "" || toStage == fromStage:
			case fromStage != "":
				bad = append(bad, fmt.Sprintf("%s imports %s: stage %s must not import stage %s; stages meet only through artifacts", from, to, fromStage, toStage))
			case under(from, "artifacts"):
				bad = append(bad, fmt.Sprintf("%s imports %s: artifacts must not import a stage", from, to))
			case from != "cmd/tilepipe":
				bad = append(bad, fmt.Sprintf("%s imports %s: only cmd/tilepipe imports stages", from, to))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// layers places every package under internal/ on a floor of the
// house below the stages (issue 28): a package imports internal packages
// of lower floors only, so what is shared stays one layer, and the test
// support (tests only, never linked into the binary) sits above it.
//
//	0  leaves: each serves stages and the audit alone
//	1  built on a leaf: the buffer sets (floors), a visit (affinity),
//	   the stopping rule (plan)
//	2  built on those: a visit's record (sets, visit), Slurm (sets)
//	3+ test support and tools
var layers = map[string]int{
	"internal/affinity": 0, "internal/floors": 0, "internal/launch": 0, "internal/load": 0, "internal/plan": 0,
	"internal/progress": 0, "internal/protocol": 0, "internal/shard": 0, "internal/telemetry": 0,
	"internal/adaptive": 1, "internal/sets": 1, "internal/visit": 1,
	"internal/record": 2, "internal/slurm": 2,
	"internal/depcheck": 3, "internal/fakecuda": 3, "internal/golden": 3, "internal/testroute": 3, "internal/slurmtest": 3,
	"internal/tools/benchratio": 4, "internal/tools/minislurm": 4,
}

// checkLayers is one message per package under internal/ that layers does
// not place, and per import of an internal package of its own floor or
// above.
func checkLayers(imports map[string][]string) []string {
	var bad []string
	for pkg, imps := range imports {
		from := rel(pkg)
		if !under(from, "internal") {
			continue
		}
		lf, ok := layers[from]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s has no floor in depcheck's layers: place it", from))
			continue
		}
		for _, imp := range imps {
			to := rel(imp)
			if lt, ok := layers[to]; ok && under(to, "internal") && lt >= lf {
				bad = append(bad, fmt.Sprintf("%s (floor %d) imports %s (floor %d): an internal package imports lower floors only", from, lf, to, lt))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

func TestInternalLayers(t *testing.T) {
	imports := listImports(t)
	if _, ok := imports[module+"/internal/record"]; !ok {
		t.Fatalf("go list did not list internal/record; got %d packages", len(imports))
	}
	for _, msg := range checkLayers(imports) {
		t.Error(msg)
	}
}

func TestCheckLayersFinds(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	got := checkLayers(map[string][]string{
		m("internal/visit"):  {m("internal/affinity"), "fmt"},            // down: allowed
		m("internal/sets"):   {m("internal/visit")},                      // the same floor
		m("internal/floors"): {m("internal/record")},                     // up
		m("internal/new"):    {m("internal/progress")},                   // unplaced
		m("replay"):          {m("internal/record"), m("internal/sets")}, // not internal: not judged here
	})
	want := []string{
		"internal/floors (floor 0) imports internal/record (floor 2): an internal package imports lower floors only",
		"internal/new has no floor in depcheck's layers: place it",
		"internal/sets (floor 1) imports internal/visit (floor 1): an internal package imports lower floors only",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("checkLayers =\n%q\nwant\n%q", got, want)
	}
}

// listImports runs go list over the module: each package's non-test
// imports.
func listImports(t *testing.T) map[string][]string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	cmd := exec.Command(gobin, "list", "-e", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	imports := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	return imports
}

func TestDependencyDirections(t *testing.T) {
	imports := listImports(t)
	// Guard against a listing that silently found nothing to check.
	for _, p := range []string{"artifacts", "oracle", "capture", "cmd/tilepipe"} {
		if _, ok := imports[module+"/"+p]; !ok {
			t.Fatalf("go list did not list %s/%s; got %d packages", module, p, len(imports))
		}
	}
	for _, msg := range check(imports) {
		t.Error(msg)
	}
}

func TestCheckFindsForbiddenEdges(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	tests := []struct {
		name    string
		imports map[string][]string
		want    []string
	}{
		{
			name: "allowed",
			imports: map[string][]string{
				m("cmd/tilepipe"):   {m("capture"), m("prepare"), m("replay"), m("audit"), m("artifacts"), "fmt"},
				m("capture"):        {m("capture/cohort"), m("artifacts"), m("oracle"), "os"},
				m("capture/cohort"): {m("oracle")},
				m("replay"):         {m("artifacts/samples"), m("stats")},
				m("artifacts"):      {m("artifacts/tensor"), m("oracle"), "github.com/opencontainers/go-digest"},
				m("oracle"):         {"math", "gonum.org/v1/gonum/blas/blas64"},
				"example.com/other": {m("capture"), m("replay")},
			},
			want: nil,
		},
		{
			name:    "store imports internal",
			imports: map[string][]string{m("artifacts"): {m("internal/crashpoint"), m("artifacts/internal/footer")}},
			want:    []string{"artifacts imports internal/crashpoint: the store imports nothing from internal/; what it needs is its own (artifacts/...)"},
		},
		{
			name:    "stage imports stage",
			imports: map[string][]string{m("replay"): {m("prepare")}},
			want:    []string{"replay imports prepare: stage replay must not import stage prepare; stages meet only through artifacts"},
		},
		{
			name:    "stage sub-package imports another stage's sub-package",
			imports: map[string][]string{m("prepare/harness"): {m("capture/cohort")}},
			want:    []string{"prepare/harness imports capture/cohort: stage prepare must not import stage capture; stages meet only through artifacts"},
		},
		{
			name:    "oracle imports a module package",
			imports: map[string][]string{m("oracle"): {"fmt", m("artifacts"), "github.com/apache/arrow-go/v18/arrow"}},
			want: []string{
				"oracle imports github.com/apache/arrow-go/v18/arrow: oracle imports only the standard library and gonum.org/...",
				"oracle imports github.com/tilepipe/tilepipe/artifacts: oracle imports only the standard library and gonum.org/...",
			},
		},
		{
			name:    "artifacts imports a stage",
			imports: map[string][]string{m("artifacts/tensor"): {m("replay")}},
			want:    []string{"artifacts/tensor imports replay: artifacts must not import a stage"},
		},
		{
			name:    "shared package imports stages",
			imports: map[string][]string{m("internal/progress"): {m("capture"), m("audit")}},
			want: []string{
				"internal/progress imports audit: only cmd/tilepipe imports stages",
				"internal/progress imports capture: only cmd/tilepipe imports stages",
			},
		},
		{
			name:    "another command imports a stage",
			imports: map[string][]string{m("cmd/other"): {m("audit")}},
			want:    []string{"cmd/other imports audit: only cmd/tilepipe imports stages"},
		},
		{
			name:    "name prefix is not a sub-package",
			imports: map[string][]string{m("captured"): {m("replay")}},
			want:    []string{"captured imports replay: only cmd/tilepipe imports stages"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := check(tt.imports); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("check(%v) = %q, want %q", tt.imports, got, tt.want)
			}
		})
	}
}

// heavy lists the modules the tilepipe binary must not link, with the
// reason: each was once pulled in by a convenience and weighed megabytes
// the GPU machine receives on every run (issue 28).
var heavy = []struct{ prefix, why string }{
	{"google.golang.org/grpc", "gRPC (arrow-go's pqarrow links it through arrow/flight; export writes Parquet itself)"},
	{"google.golang.org/protobuf", "protobuf (arrow/flight's)"},
	{"google.golang.org/genproto", "genproto (arrow/flight's)"},
	{"github.com/apache/arrow-go/v18/arrow/flight", "Arrow Flight (pqarrow stores the schema through it)"},
	{"github.com/apache/arrow-go/v18/parquet", "arrow-go's Parquet (18 MB: its encodings link arrow/compute; export writes Parquet itself, tests read it with pqarrow)"},
	{"github.com/apache/arrow-go/v18/arrow/compute", "arrow/compute's kernels (6 MB)"},
	{"gonum.org/v1/plot", "gonum/plot (five canvases and twelve fonts, 7 MB; the report draws its own SVG)"},
	{"golang.org/x/net", "x/net outside the standard library's vendored copy (gRPC's)"},
	{"testing", "the testing package (a test helper in a non-test file takes testing.TB: artifacts.TB is the way)"},
}

// MaxStripped is the most the stripped static binary may weigh (issue 28:
// 25 MB; 19.3 MB after the Parquet writer and the plots of our own).
const MaxStripped = 25_000_000

// heavyDeps is one message per dependency in deps (a binary's transitive
// imports) that heavy forbids.
func heavyDeps(deps []string) []string {
	var bad []string
	for _, d := range deps {
		for _, h := range heavy {
			if d == h.prefix || strings.HasPrefix(d, h.prefix+"/") {
				bad = append(bad, fmt.Sprintf("cmd/tilepipe links %s: %s", d, h.why))
			}
		}
	}
	return bad
}

func TestBinaryLinksNoHeavyDeps(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	cmd := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}}", "./cmd/tilepipe")
	cmd.Dir = "../.."
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0") // the GPU machine's static binary
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/apache/arrow-go/v18/arrow/ipc") {
		t.Fatalf("go list -deps ./cmd/tilepipe lists no arrow/ipc among %d packages: the listing checks nothing", len(deps))
	}
	for _, msg := range heavyDeps(deps) {
		t.Error(msg)
	}
}

// TestBinaryWeight builds the static binary as the GPU machine gets it
// (CGO_ENABLED=0, stripped) and holds it to MaxStripped.
func TestBinaryWeight(t *testing.T) {
	if testing.Short() {
		t.Skip("long: builds the binary; make test runs it")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	exe := filepath.Join(t.TempDir(), "tilepipe")
	cmd := exec.Command(gobin, "build", "-ldflags=-s -w", "-o", exe, "./cmd/tilepipe")
	cmd.Dir = "../.."
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	st, err := os.Stat(exe)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > MaxStripped {
		t.Errorf("the stripped static binary is %d bytes, more than %d (docs/results/2026-12-06-binary-weight/measure.sh says what it links)", st.Size(), MaxStripped)
	}
	t.Logf("stripped static binary: %d bytes", st.Size())
}

func TestHeavyDepsFound(t *testing.T) {
	got := heavyDeps([]string{"fmt", "vendor/golang.org/x/net/idna", "google.golang.org/grpc/codes", "golang.org/x/net/http2", "github.com/apache/arrow-go/v18/arrow/ipc", "github.com/apache/arrow-go/v18/parquet/file", "gonum.org/v1/plot/vg", "testing", "testingx"})
	want := []string{
		"cmd/tilepipe links google.golang.org/grpc/codes: gRPC (arrow-go's pqarrow links it through arrow/flight; export writes Parquet itself)",
		"cmd/tilepipe links golang.org/x/net/http2: x/net outside the standard library's vendored copy (gRPC's)",
		"cmd/tilepipe links github.com/apache/arrow-go/v18/parquet/file: arrow-go's Parquet (18 MB: its encodings link arrow/compute; export writes Parquet itself, tests read it with pqarrow)",
		"cmd/tilepipe links gonum.org/v1/plot/vg: gonum/plot (five canvases and twelve fonts, 7 MB; the report draws its own SVG)",
		"cmd/tilepipe links testing: the testing package (a test helper in a non-test file takes testing.TB: artifacts.TB is the way)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("heavyDeps = %q\nwant %q", got, want)
	}
}

// layoutNames are the package paths README's layout table names: every
// backticked path in its first column (a path ending in / names its
// directory's packages).
func layoutNames(readme string) ([]string, error) {
	_, table, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		return nil, fmt.Errorf("README.md has no \"## Layout\" section")
	}
	table, _, _ = strings.Cut(table, "\n\n## ")
	var names []string
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for i, part := range strings.Split(first, "`") {
			if i%2 == 1 {
				names = append(names, part)
			}
		}
	}
	return names, nil
}

// unlisted is every module-relative package of pkgs that names does not
// cover.
func unlisted(pkgs, names []string) []string {
	var out []string
	for _, p := range pkgs {
		covered := false
		for _, n := range names {
			if p == strings.TrimSuffix(n, "/") || (strings.HasSuffix(n, "/") && strings.HasPrefix(p, n)) || (strings.HasPrefix(p, n+"/") && strings.Contains(p, "/internal/")) {
				covered = true
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	return out
}

// TestLayoutTable: README's layout table names every package of the module
// (evidence scripts under docs/ excepted).
func TestLayoutTable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	names, err := layoutNames(string(b))
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for p := range listImports(t) {
		if r := rel(p); r != "" && !under(r, "docs") {
			pkgs = append(pkgs, r)
		}
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages: the check checks nothing", len(pkgs))
	}
	sort.Strings(pkgs)
	for _, p := range unlisted(pkgs, names) {
		t.Errorf("package %s is not in README.md's layout table", p)
	}
}

func TestUnlisted(t *testing.T) {
	names, err := layoutNames("x\n## Layout\n\n| package | role |\n| --- | --- |\n| `artifacts`, `internal/visit` | a |\n| `routes/` | b |\n\n## Next\n| `stats` | c |\n")
	if err != nil {
		t.Fatal(err)
	}
	got := unlisted([]string{"artifacts", "artifacts/internal/footer", "artifacts/sign", "internal/visit", "routes/orc", "stats"}, names)
	if want := []string{"artifacts/sign", "stats"}; !reflect.DeepEqual(got, want) {
		t.Errorf("unlisted = %q, want %q (names %q)", got, want, names)
	}
}
