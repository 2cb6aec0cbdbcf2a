package launch

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/oracle"
)

var addSig = oracle.SignatureOf("add", map[string]int{"M": 1000, "N": 1000}, "f32")

// probeAdd is the manifest of the Triton add kernel measured on the H200
// (docs/results/2026-12-01-cuda-probe): three pointers, n, and Triton's
// two scratch pointers of size 0.
const probeAdd = `{"kernel": "add_kernel", "arch": "sm_90", "grid": [977, 1, 1], "block": [128, 1, 1], "cluster": [1, 1, 1], "sharedBytes": 0,
 "params": [{"kind": "tensor", "tensor": "A", "align": 16}, {"kind": "tensor", "tensor": "B", "align": 16}, {"kind": "tensor", "tensor": "C", "align": 16},
  {"kind": "i32", "value": 1000000}, {"kind": "scratch"}, {"kind": "scratch"}],
 "scratch": [{"bytes": 0, "align": 1}, {"bytes": 0, "align": 1}], "ptxas": ["-lineinfo", "-v"]}`

func TestProbeManifest(t *testing.T) {
	m, err := Parse([]byte(probeAdd))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Check(addSig); err != nil {
		t.Fatalf("Check(the H200 probe's add) = %v, want nil", err)
	}
	want := "kernel add_kernel\narch sm_90\ngrid 977 1 1\nblock 128 1 1\ncluster 1 1 1\nshared 0\n" +
		"param tensor 0 16\nparam tensor 1 16\nparam tensor 2 16\nparam i32 1000000\nparam scratch 0 1\nparam scratch 0 1\n"
	if got := m.Lines(addSig); got != want {
		t.Errorf("Lines =\n%s\nwant\n%s", got, want)
	}
}

// TestParseRefuses: what is not one strict manifest.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"kernel": "k", "extra": 1}`, `launch manifest: json: unknown field "extra"`},
		{probeAdd + ` {}`, "launch manifest: want one JSON object, found more after it"},
		{`[1]`, "launch manifest: json: cannot unmarshal array into Go value of type launch.Manifest"},
		{strings.Repeat(" ", MaxManifestBytes+1), "launch manifest: 1048577 bytes, limit 1048576"},
	} {
		if _, err := Parse([]byte(tc.in)); err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%.40q) = %v, want %s", tc.in, err, tc.want)
		}
	}
}

// TestCheckRefuses: every check of Check, each fed a manifest that breaks
// it, with the exact reason.
func TestCheckRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"kernel", `"kernel": "add_kernel"`, `"kernel": "add kernel"`, `kernel: "add kernel" is not a symbol`},
		{"arch", `"arch": "sm_90"`, `"arch": "90"`, `arch: want sm_NN (the compute capability built for), got "90"`},
		{"grid 0", `"grid": [977, 1, 1]`, `"grid": [0, 1, 1]`, "grid[0]: want 1 to 2147483647, got 0"},
		{"grid y", `"grid": [977, 1, 1]`, `"grid": [977, 65536, 1]`, "grid[1]: want 1 to 65535, got 65536"},
		{"block", `"block": [128, 1, 1]`, `"block": [1025, 1, 1]`, "block[0]: want 1 to 1024, got 1025"},
		{"block product", `"block": [128, 1, 1]`, `"block": [128, 16, 1]`, "block: 2048 threads, limit 1024"},
		{"cluster 0", `"cluster": [1, 1, 1]`, `"cluster": [0, 1, 1]`, "cluster[0]: want at least 1, got 0"},
		{"cluster divides", `"cluster": [1, 1, 1]`, `"cluster": [2, 1, 1]`, "cluster[0]: 2 does not divide grid[0] 977"},
		{"shared", `"sharedBytes": 0`, `"sharedBytes": 300000`, "sharedBytes: 300000, limit 232448"},
		{"unknown tensor", `"tensor": "A"`, `"tensor": "X"`, `params[0]: tensor "X" is not in the case's signature`},
		{"tensor twice", `"tensor": "B"`, `"tensor": "A"`, `params[1]: tensor "A" already passed as params[0]`},
		{"tensor missing", `{"kind": "tensor", "tensor": "C", "align": 16},`, ``, `tensor "C" of the signature is passed by no parameter`},
		{"align", `"tensor": "A", "align": 16`, `"tensor": "A", "align": 12`, "params[0]: align 12: want a power of two up to 4096 (or 0)"},
		{"kind", `{"kind": "i32", "value": 1000000}`, `{"kind": "u8", "value": 1}`, `params[3]: kind "u8": want tensor, i32, i64, f32, scratch`},
		{"i32 range", `"value": 1000000`, `"value": 3000000000`, `params[3]: i32 value "3000000000": want a 32-bit integer`},
		{"i32 float", `"value": 1000000`, `"value": 1.5`, `params[3]: i32 value "1.5": want a 32-bit integer`},
		{"no value", `{"kind": "i32", "value": 1000000}`, `{"kind": "i32"}`, "params[3]: kind i32: no value"},
		{"value on tensor", `"tensor": "A", "align": 16`, `"tensor": "A", "value": 3`, "params[0]: kind tensor: a value only for i32, i64 and f32"},
		{"tensor on scalar", `{"kind": "i32", "value": 1000000}`, `{"kind": "i32", "value": 1, "tensor": "A"}`, `params[3]: kind i32 names tensor "A"`},
		{"scratch count", `"scratch": [{"bytes": 0, "align": 1}, {"bytes": 0, "align": 1}]`, `"scratch": [{"bytes": 0, "align": 1}]`, "scratch: 1 sizes for 2 scratch parameters"},
		{"scratch align", `"scratch": [{"bytes": 0, "align": 1}, `, `"scratch": [{"bytes": 0, "align": 3}, `, "scratch[0].align: want a power of two up to 4096, got 3"},
		{"scratch size", `"scratch": [{"bytes": 0, "align": 1}, `, `"scratch": [{"bytes": -1, "align": 1}, `, "scratch[0].bytes: want 0 to 1073741824, got -1"},
		{"no ptxas flags", `, "ptxas": ["-lineinfo", "-v"]`, ``, `ptxas: want the flags ptxas built the cubin with from the PTX, beside --gpu-name (for example ["-lineinfo", "-v"]; [] for none): prepare builds it again`},
		{"ptxas names a file", `"ptxas": ["-lineinfo", "-v"]`, `"ptxas": ["-lineinfo", "-o", "/tmp/x"]`, `ptxas[1]: "-o" is not one of -lineinfo -suppress-debug-info -v --fmad=false --fmad=true -O0 -O1 -O2 -O3`},
		{"ptxas arch", `"ptxas": ["-lineinfo", "-v"]`, `"ptxas": ["--gpu-name=sm_80"]`, `ptxas[0]: "--gpu-name=sm_80" is not one of -lineinfo -suppress-debug-info -v --fmad=false --fmad=true -O0 -O1 -O2 -O3`},
		{"ptxas twice", `"ptxas": ["-lineinfo", "-v"]`, `"ptxas": ["-v", "-v"]`, `ptxas[1]: "-v" given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(probeAdd, tc.from) {
				t.Fatalf("the probe manifest has no %q", tc.from)
			}
			m, err := Parse([]byte(strings.Replace(probeAdd, tc.from, tc.to, 1)))
			if err == nil {
				err = m.Check(addSig)
			}
			if want := "launch manifest: " + tc.want; err == nil || err.Error() != want {
				t.Errorf("got %v\nwant %s", err, want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(probeAdd))
	f.Add([]byte(splitK))
	f.Add([]byte(`{"params": [{"kind": "f32", "value": 1e39}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		if m.Check(addSig) == nil {
			_ = m.Lines(addSig) // a checked manifest always renders
		}
	})
}

// TestMatchPTX: the manifest against the PTX Triton 3.6 emitted for the
// probe's add on the H200 (testdata): it matches; one parameter too few,
// or an integer where the entry has a pointer, is refused.
func TestMatchPTX(t *testing.T) {
	ptx, err := os.ReadFile("testdata/triton-add-sm90.ptx")
	if err != nil {
		t.Fatal(err)
	}
	types, err := EntryParams(ptx, "add_kernel")
	if want := []string{"u64", "u64", "u64", "u32", "u64", "u64"}; err != nil || !slices.Equal(types, want) {
		t.Fatalf("EntryParams = %v, %v; want %v", types, err, want)
	}
	m, _ := Parse([]byte(probeAdd))
	if err := m.MatchPTX(ptx); err != nil {
		t.Errorf("MatchPTX(the probe) = %v", err)
	}
	short := m
	short.Params = m.Params[:5]
	if err, want := short.MatchPTX(ptx), "launch manifest: 5 params, the PTX entry add_kernel has 6 (u64 u64 u64 u32 u64 u64)"; err == nil || err.Error() != want {
		t.Errorf("MatchPTX(5 params) = %v, want %s", err, want)
	}
	swapped := m
	swapped.Params = slices.Clone(m.Params)
	swapped.Params[0], swapped.Params[3] = swapped.Params[3], swapped.Params[0]
	if err, want := swapped.MatchPTX(ptx), "launch manifest: params[0]: kind i32, the PTX entry passes .u64"; err == nil || err.Error() != want {
		t.Errorf("MatchPTX(n first) = %v, want %s", err, want)
	}
	other := m
	other.Kernel = "mul_kernel"
	if err, want := other.MatchPTX(ptx), "launch manifest: ptx: no .entry mul_kernel"; err == nil || err.Error() != want {
		t.Errorf("MatchPTX(another kernel) = %v, want %s", err, want)
	}
}
