package routes_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeTorch writes a stand-in interpreter for the torch-compile route: it
// answers torch-eager's probe as a torch of version ver (CUDA cuda, ""
// for none) and runs `wrapper.py --compile-run DIR ...` as compileRun
// says, a shell snippet that sees DIR as $dir. The route's own checks
// (what it accepts and refuses around the compile) are what the tests
// with it exercise; the real torch.compile runs on the GPU machine
// (docs/results/2026-12-07-torch-compile).
func fakeTorch(t *testing.T, ver, cuda, compileRun string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-python3")
	script := `#!/bin/sh
if [ "$1" = "-c" ]; then
  echo '{"torch": "` + ver + `", "python": "3.12.0", "executable": "'"$0"'", "git": "", "cuda": "` + cuda + `", "cuda_unavailable": "", "gpu": "Fake GPU", "variants": {}}'
  exit 0
fi
dir=$3
` + compileRun + `
`
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// compileJSON is a --compile-run answer: added is the files it reports
// written, recompiled its reason ("" for none).
func compileJSON(added []string, recompiled string) string {
	if added == nil {
		added = []string{}
	}
	js, _ := json.Marshal(map[string]any{
		"import_s": 1.0, "first_call_s": 2.5, "next_call_s": 1e-5, "recompiled": recompiled,
		"counters": map[string]int{"fxgraph_cache_hit": 1, "cudagraph_skips": 0},
		"torch":    "2.11.0", "triton": "3.6.0", "cuda": "13.0", "gpu": "Fake GPU", "mode": "max-autotune", "style": "copy",
		"added": added, "removed": []string{}, "changed": []string{}})
	return "cat <<'JSON'\n" + string(js) + "\nJSON"
}

// buildCompile runs torch-compile's build of a cuda (or cpu) case of op.
func buildCompile(t *testing.T, op, device string, dims map[string]int, env []string) (buildResp, string) {
	t.Helper()
	tmp := t.TempDir()
	work := filepath.Join(tmp, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(map[string]any{"id": op + "-case", "op": op, "dims": dims, "dtype": "f32", "pattern": "normal",
		"seed": 1, "policy": "strict", "params": map[string]float64{"eps": eps}, "signature": signature(op, dims), "threads": 1, "device": device})
	if err != nil {
		t.Fatal(err)
	}
	casePath := filepath.Join(tmp, "case.json")
	if err := os.WriteFile(casePath, js, 0o644); err != nil {
		t.Fatal(err)
	}
	var b buildResp
	decode(t, "torch-compile build "+op, run(t, tmp, env, routeExe(t, "torch-compile"), "build", "--case", casePath, "--workdir", work), &b)
	return b, work
}

// TestTorchCompileDescribe: the route is available only under a torch 2
// built with CUDA, and says why not otherwise.
func TestTorchCompileDescribe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ ver, cuda, reason string }{
		{"1.13.0", "", "torch 1.13.0 (%s) has no torch.compile: the route needs torch 2 or later"},
		{"2.11.0", "", "torch 2.11.0 was built without CUDA: the route compiles for the GPU alone"},
		{"2.11.0", "13.0", ""},
	} {
		fake := fakeTorch(t, tc.ver, tc.cuda, "exit 1")
		d := parseDescribe(t, "torch-compile describe", run(t, ".", []string{"TILEPIPE_TORCH_PYTHON=" + fake}, routeExe(t, "torch-compile"), "describe"))
		want := strings.Replace(tc.reason, "%s", fake, 1)
		if d.Available != (want == "") || d.Reason != want || !slices.Equal(d.Devices, []string{"cuda"}) || d.Kind != "process" {
			t.Errorf("describe under torch %s (cuda %q) = available %v reason %q devices %v kind %s, want %v %q [cuda] process",
				tc.ver, tc.cuda, d.Available, d.Reason, d.Devices, d.Kind, want == "", want)
		}
	}
}

// TestTorchCompileBuildRefuses: the cases the route refuses before it
// compiles, and the compiled caches it refuses to hand over: one that a
// fresh process does not load unchanged (a file added, or a recompile).
func TestTorchCompileBuildRefuses(t *testing.T) {
	t.Parallel()
	dims := dimsFor("add")
	honest := `case "$dir" in */replay-check-*/cache) ;; *) mkdir -p "$dir/inductor/ab" && echo graph > "$dir/inductor/ab/fxgraph" ;; esac
` + compileJSON(nil, "")
	// The first fresh load on the cache itself adds a kernel (an autotuned
	// kernel rebuilt from its best config); the check's copy adds nothing.
	settles := `case "$dir" in */replay-check-*/cache) ;;
*) if [ -f "$dir/triton/best.cubin" ]; then
` + compileJSON(nil, "") + `
exit 0
fi
if [ -f "$dir/inductor/ab/fxgraph" ]; then mkdir -p "$dir/triton" && echo k > "$dir/triton/best.cubin"
` + compileJSON([]string{"triton/best.cubin"}, "") + `
exit 0
fi
mkdir -p "$dir/inductor/ab" && echo graph > "$dir/inductor/ab/fxgraph" ;;
esac
` + compileJSON(nil, "")
	torch2 := func(run string) []string {
		return []string{"TILEPIPE_TORCH_PYTHON=" + fakeTorch(t, "2.11.0", "13.0", run)}
	}
	for _, tc := range []struct {
		name, op, device string
		env              []string
		status, reason   string
	}{
		{"cpu case", "add", "cpu", nil, "unsupported", "torch-compile builds for cuda alone, the case runs on cpu"},
		{"ordered scan", "scan_ordered", "cuda", nil, "unsupported",
			"torch-compile: scan_ordered: an ordered (sequential FP32) scan has no torch.compile form but N unrolled adds"},
		{"unknown mode", "add", "cuda", []string{"TILEPIPE_COMPILE_MODE=fast"}, "failed",
			"$TILEPIPE_COMPILE_MODE: want one of default, max-autotune-no-cudagraphs, max-autotune, got 'fast'"},
		{"torch 1", "add", "cuda", []string{"TILEPIPE_TORCH_PYTHON=" + fakeTorch(t, "1.13.0", "", "exit 1")}, "failed",
			"has no torch.compile: the route needs torch 2 or later"},
		{"compile fails", "add", "cuda", torch2(`echo "InductorError: no ptxas" >&2; exit 1`), "failed",
			"torch.compile of add (max-autotune): exit 1: InductorError: no ptxas"},
		{"writes at replay", "add", "cuda", torch2(`case "$dir" in */replay-check-*/cache) mkdir -p "$dir/triton" && : > "$dir/triton/k.cubin" ;; *) mkdir -p "$dir/inductor" && echo g > "$dir/inductor/g" ;; esac
` + compileJSON([]string{"triton/k.cubin"}, "")), "failed",
			"the compiled cache of add (max-autotune) does not replay unchanged in a fresh process: 1 files differ: cache/triton/k.cubin added"},
		{"settle recompiles", "add", "cuda", torch2(`if [ -f "$dir/inductor/g" ]; then
` + compileJSON(nil, "recompiled: fxgraph_cache_miss 1") + `
else mkdir -p "$dir/inductor" && echo g > "$dir/inductor/g"
` + compileJSON(nil, "") + `
fi`), "failed", "the compiled cache of add (max-autotune) does not load in a fresh process: recompiled: fxgraph_cache_miss 1"},
		{"settles", "add", "cuda", torch2(settles), "built", ""},
		{"never settles", "add", "cuda", torch2(`mkdir -p "$dir/triton" && echo k > "$dir/triton/k$(ls "$dir/triton" | wc -l).cubin"
` + compileJSON([]string{"triton/again.cubin"}, "")), "failed",
			"the compiled cache of add (max-autotune) does not replay unchanged in a fresh process: 1 files differ: cache/triton/again.cubin added"},
		{"recompiles at replay", "add", "cuda", torch2(`case "$dir" in */replay-check-*/cache)
` + compileJSON(nil, "recompiled: torch.compile did not run the captured graph alone in this run (fxgraph_cache_hit 0, fxgraph_cache_miss 1, fxgraph_cache_bypass 0, autograd_cache_hit 0, unique_graphs 1; want a cache hit, no miss and 1 graph)") + `
;;
*)
` + compileJSON(nil, "") + `
;;
esac`), "failed",
			"the compiled cache of add (max-autotune) does not replay unchanged in a fresh process: recompiled: torch.compile did not run the captured graph alone in this run (fxgraph_cache_hit 0, fxgraph_cache_miss 1, fxgraph_cache_bypass 0, autograd_cache_hit 0, unique_graphs 1; want a cache hit, no miss and 1 graph)"},
		{"honest", "add", "cuda", torch2(honest), "built", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, work := buildCompile(t, tc.op, tc.device, dims, tc.env)
			if b.Status != tc.status || !strings.HasSuffix(b.Reason, tc.reason) || (tc.reason == "" && b.Reason != "") {
				t.Fatalf("build = %s %q, want %s %q", b.Status, b.Reason, tc.status, tc.reason)
			}
			if tc.status != "built" {
				return
			}
			want, settled := []fileResp{{"wrapper.py", "wrapper"}, {"cache/inductor/ab/fxgraph", "cache"}}, []any{0.0}
			if tc.name == "settles" {
				want, settled = append(want, fileResp{"cache/triton/best.cubin", "cache"}), []any{1.0, 0.0}
			}
			if !slices.Equal(b.Files, want) {
				t.Errorf("files = %v, want %v", b.Files, want)
			}
			if _, err := os.Stat(filepath.Join(work, "cache", "inductor", "ab", "fxgraph")); err != nil {
				t.Errorf("the compiled cache is not in the workdir: %v", err)
			}
			if b.Process == nil || !slices.Equal(b.Process.Args[len(b.Process.Args)-2:], []string{"--compile", "max-autotune"}) ||
				!slices.Equal(b.Process.ClosureArgs, []string{"--device", "cuda", "--compile", "max-autotune"}) || b.Process.OutputPolicy != "copy" {
				t.Errorf("process = %+v, want args ending --compile max-autotune, closure args --device cuda --compile max-autotune, policy copy", b.Process)
			}
			var sched map[string]any
			if err := json.Unmarshal(b.Schedule, &sched); err != nil || sched["mode"] != "max-autotune" || sched["compile_first_call_s"] != 2.5 || sched["cudagraphs"] != "used" ||
				sched["own_graphs"] != "torch.compile max-autotune: every call replays Inductor's CUDA graphs (cudagraph trees)" ||
				fmt.Sprint(sched["settle_added_files"]) != fmt.Sprint(settled) {
				t.Errorf("schedule = %s, want mode max-autotune, compile_first_call_s 2.5, cudagraphs used, own_graphs, settle_added_files %v", b.Schedule, settled)
			}
			if entries, _ := os.ReadDir(work); len(entries) != 2 {
				t.Errorf("workdir holds %d entries, want wrapper.py and cache/ (the replay check's copy removed)", len(entries))
			}
		})
	}
}
