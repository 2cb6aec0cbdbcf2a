package depcheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"reflect"
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
