package routes

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/cohort"
	"github.com/tilepipe/tilepipe/internal/launch"
	"github.com/tilepipe/tilepipe/oracle"
)

// planScript loads the triton route as a module (its plan needs no
// Triton) and answers, for each case on stdin, the kernel it would build
// and the signature tensors it passes, or why not.
const planScript = `
import importlib.machinery, importlib.util, json, sys
loader = importlib.machinery.SourceFileLoader("triton_route", sys.argv[1])
spec = importlib.util.spec_from_loader(loader.name, loader)
route = importlib.util.module_from_spec(spec)
loader.exec_module(route)
out = []
for c in json.load(sys.stdin):
    pl = route.plan(c)
    if isinstance(pl, str):
        out.append({"id": c["id"], "refused": pl})
        continue
    kernel, args, constexprs, grid, options = pl
    defined = ("def %s(" % kernel) in route.KERNEL_SOURCE
    # The kernel's runtime parameters, in order, as its def line names
    # them (constexprs left out): what the args must be.
    head = route.KERNEL_SOURCE.split("def %s(" % kernel, 1)[-1].split("):", 1)[0]
    runtime = [p.split(":")[0].strip() for p in head.replace("\n", " ").split(",") if p.strip() and "constexpr" not in p]
    # The manifest the build would write, for a compiled kernel of no
    # scratch memory with Triton's two trailing scratch pointers.
    md = type("md", (), dict(name=kernel, num_warps=options.get("num_warps", 4), shared=0, cluster_dims=(1, 1, 1),
                             global_scratch_size=0, global_scratch_align=1, profile_scratch_size=0, profile_scratch_align=1))
    manifest = route.manifest_of(md, 90, args, grid, ["u64"] * (len(args) + 2), [])
    grids = [list(g) for g, _ in grid] if isinstance(grid, list) else [list(grid)]
    out.append({"id": c["id"], "kernel": kernel, "defined": defined and runtime == [n for n, _, _ in args], "manifest": manifest,
                "tensors": [v for _, ty, v in args if ty.startswith("*") and not isinstance(v, dict)], "grid": min(grids, key=min)})
json.dump(out, sys.stdout)
`

// TestTritonPlans: the triton route plans a kernel for every case of the
// GPU cohorts (every operator, every storage type; the kernels compile
// only on the GPU machine), a kernel its source defines with exactly
// the plan's runtime arguments in order, passing each
// tensor of the case's signature exactly once, on a grid of at least one
// program. CI has no Triton: this is the part of a build it can check.
func TestTritonPlans(t *testing.T) {
	t.Parallel()
	route, err := filepath.Abs("triton/route")
	if err != nil {
		t.Fatal(err)
	}
	type planned struct {
		ID, Kernel, Refused string
		Defined             bool
		Tensors             []string
		Grid                []int
		Manifest            json.RawMessage
	}
	var pipelines []string
	for _, name := range []string{"gpu-llm", "gpu-default", "gpu-quick"} {
		co, _, err := cohort.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		sigs, params := map[string][]string{}, map[string][]oracle.Param{}
		var in []map[string]any
		for _, c := range co.Cases {
			sig, err := oracle.Signature(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range sig {
				sigs[c.ID] = append(sigs[c.ID], p.Name)
			}
			params[c.ID] = sig
			in = append(in, map[string]any{"id": c.ID, "op": c.Op, "dims": c.Dims, "dtype": c.Dtype, "policy": c.Policy, "params": c.Params})
		}
		b, _ := json.Marshal(in)
		cmd := exec.Command("python3", "-c", planScript, route)
		cmd.Stdin = strings.NewReader(string(b))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: plan: %v: %s", name, err, stderr.String())
		}
		var got []planned
		if err := json.Unmarshal(out, &got); err != nil || len(got) != len(co.Cases) {
			t.Fatalf("%s: %d plans for %d cases (%v): %s", name, len(got), len(co.Cases), err, out)
		}
		for _, p := range got {
			want := slices.Sorted(slices.Values(sigs[p.ID]))
			if p.Refused != "" || !p.Defined || !slices.Equal(slices.Sorted(slices.Values(p.Tensors)), want) || slices.Min(p.Grid) < 1 {
				t.Errorf("%s %s: kernel %q (defined %v) tensors %v grid %v refused %q; want a defined kernel passing %v", name, p.ID, p.Kernel, p.Defined, p.Tensors, p.Grid, p.Refused, want)
			}
			m, err := launch.Parse(p.Manifest)
			if err == nil {
				err = m.Check(params[p.ID])
			}
			if err != nil {
				t.Errorf("%s %s: the manifest the build would write: %v\n%s", name, p.ID, err, p.Manifest)
			}
			if m.Pipeline() {
				pipelines = append(pipelines, name+" "+p.ID)
			}
		}
	}
	// Decode attention splits its keys (flash-decoding) into a pipeline
	// of two launches wherever its heads alone do not fill the GPU and
	// the keys are more than one block.
	if want := []string{"gpu-llm attn-decode-gqa-2048-bf16", "gpu-llm attn-decode-mqa-4096-f16", "gpu-llm attn-decode-mha-ragged-1027-bf16",
		"gpu-llm attn-decode-gqa-8192-f32", "gpu-llm attn-adversarial-gqa-bf16",
		"gpu-default attention-1x8x1x1x1024x128x128-cuda", "gpu-default attention-1x8x1x1x1024x128x128-bf16-cuda"}; !slices.Equal(pipelines, want) {
		t.Errorf("pipelines planned for %q, want %q", pipelines, want)
	}
}
